"""What the ``ctxproxy`` subcommands do beyond parsing their arguments (``ctxproxy.cli``)."""
