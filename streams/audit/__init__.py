"""Offline audits of what the worker decided: replay a file or a topic range, start runs from the worker's
stored state (``--with-state``), compare with recorded verdicts and explain one run."""
