"""Text analysis: entities and their typed mentions (`entities`, scanned by
`entity_patterns`), a conversation's entities (`entity_repository`),
pronoun and definite references (`crossref`), an optional ONNX NER model
(`ner`), and the conversation arc (`arc`: topics, open questions,
decisions, actions), relative dates resolved against a message's time
(`temporal`)."""
