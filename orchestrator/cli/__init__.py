"""The ``coopsim`` command line: the parser (``main``), argument types and one module per command."""
