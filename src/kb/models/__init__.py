"""What a model is to kb, with no model behind it: the `ChatModel`, `Embedder` and
`CrossEncoder` interfaces and the prompt record (`base`), the providers by name
(`providers`), and how many tokens an embedder reads (`tokens`)."""
