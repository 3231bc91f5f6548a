"""attnprops' property suite: strategies, error bounds, assertion helpers and the property
tests any attention implementation (a *subject*) can be run against.

Select the subject with ``pytest --attn-impl MODULE`` or ``ATTN_IMPL=MODULE`` (default
``attnprops.impl``); see :mod:`properties.subject` for what a subject may declare.
"""

# Here, not in properties.subject (which imports NumPy): the installed pytest plugin reads them
# in every pytest run of the environment, also in runs that never use the suite.
DEFAULT_SUBJECT = "attnprops.impl"
ENV_VAR = "ATTN_IMPL"
# The dtypes a subject is tested in unless it declares its own (``dtypes``): bfloat16 is
# opt-in (oracle.rules.FLOAT_DTYPES accepts it), as many NumPy functions refuse it
# (np.einsum) or change it (``@`` returns float32), so an undeclared subject is not blamed
# for its dtype.
DEFAULT_DTYPES = ("float16", "float32", "float64")
