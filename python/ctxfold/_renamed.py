"""Arguments renamed in the public API: the old keyword keeps working for one
release with a `DeprecationWarning` naming the new one (the compiled module
says the same words for its own renamed arguments)."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from ctxfold.errors import InvalidTypeError

__all__ = ["renamed_arguments", "deprecation_message"]

F = TypeVar("F", bound=Callable[..., Any])


def deprecation_message(function: str, old: str, new: str) -> str:
    return f"{function}: the argument {old}= is now {new}=; {old}= will be removed in the next release"


def renamed_arguments(**renames: str) -> Callable[[F], F]:
    """Decorate a function whose keyword arguments were renamed, as
    ``@renamed_arguments(target_tokens="budget")``: a call with the old keyword
    warns and passes the value under the new one; passing both is an error."""

    def decorate(func: F) -> F:
        name = func.__qualname__

        def translate(kwargs: dict[str, Any]) -> None:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise InvalidTypeError(f"{name}: got both {new}= and its old name {old}=; pass only {new}=")
                # stacklevel 3: past this helper and the wrapper, to the caller's line.
                warnings.warn(deprecation_message(name, old, new), DeprecationWarning, stacklevel=3)
                kwargs[new] = kwargs.pop(old)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                translate(kwargs)
                return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            translate(kwargs)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
