"""attnprops' property suite: strategies, error bounds, assertion helpers and the property
tests any attention implementation (a *subject*) can be run against.

Select the subject with ``pytest --attn-impl MODULE`` or ``ATTN_IMPL=MODULE`` (default
``impl``); see :mod:`properties.subject` for what a subject may declare.
"""
