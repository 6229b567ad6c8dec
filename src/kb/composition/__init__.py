"""The pieces the composition root (`kb.container`) is made of: the models a config names,
and the parts that write the index."""
