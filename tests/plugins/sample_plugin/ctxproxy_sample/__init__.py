"""A sample ctxproxy plugin (see pyproject.toml): what ctxproxy's tests install and use."""
