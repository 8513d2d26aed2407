"""Text analysis without a model: entities (`entities`) and the
conversation arc (`arc`: topics, open questions, decisions, actions)."""
