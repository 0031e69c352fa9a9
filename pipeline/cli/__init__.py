"""`extract`, the command line: `main` builds the parser from one module per command; `options` holds what the
commands share (the job options' parent parser, --set overrides, --date). `python -m pipeline` is the same."""
