"""attnprops' jobs: the ``attnprops`` command, the mutation-kill runner and report, the audit."""
