"""Text analysis without a model: entities (`entities`)."""
