"""attnprops' property suite: strategies, error bounds, assertion helpers and the property
tests any attention implementation (a *subject*) can be run against.

Select the subject with ``pytest --attn-impl MODULE`` or ``ATTN_IMPL=MODULE`` (default
``attnprops.impl``); see :mod:`properties.subject` for what a subject may declare.
"""

# Here, not in properties.subject (which imports NumPy): the installed pytest plugin reads them
# in every pytest run of the environment, also in runs that never use the suite.
DEFAULT_SUBJECT = "attnprops.impl"
ENV_VAR = "ATTN_IMPL"
