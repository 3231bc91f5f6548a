"""oracle.rules.options: the keyword options, named once, taken by every attention function."""

import inspect

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle import ball
from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import OPTIONS
from attnprops.oracle.rules import SERVING_OPTIONS
from attnprops.oracle.rules import check_attention_call
from attnprops.oracle.rules import takes_options

PUBLIC = [
    check_attention_call,
    oracle.attention,
    oracle.attention_weights,
    oracle.attention_scores,
    oracle.attention_parts,
    ball.attention_parts,
    impl.attention,
    impl.attention_weights,
]


@pytest.mark.parametrize("function", PUBLIC, ids=lambda f: f.__module__ + "." + f.__qualname__)
def test_every_attention_function_lists_the_options_with_their_defaults(function):
    parameters = inspect.signature(function).parameters
    listed = {n: p.default for n, p in parameters.items() if n in OPTIONS}
    assert listed == dict(OPTIONS)
    assert all(parameters[n].kind is inspect.Parameter.KEYWORD_ONLY for n in OPTIONS)


@pytest.mark.parametrize("function", [oracle.attention, impl.attention, ball.attention_parts])
def test_a_misspelt_option_is_a_type_error_naming_the_function(function):
    q = np.ones((2, 3))
    with pytest.raises(
        TypeError, match=rf"{function.__name__}\(\) got an unexpected keyword argument 'is_casual'"
    ):
        function(q, q, q, is_casual=True)


def test_options_arrive_complete_and_the_functions_own_keywords_stay_its_own():
    seen = {}

    @takes_options(without=("sinks",))
    def subject(query, *, flag=False, **options):
        seen.update(options, flag=flag)

    subject(1, scale=0.5, flag=True)
    expected = {n: d for n, d in OPTIONS.items() if n != "sinks"} | {"scale": 0.5, "flag": True}
    assert seen == expected
    assert list(inspect.signature(subject).parameters)[-1] == "flag"
    with pytest.raises(TypeError, match="unexpected keyword argument 'sinks'"):
        subject(1, sinks=np.zeros(1))
    with pytest.raises(TypeError, match="unexpected keyword argument 'options'"):
        subject(1, options={})


def test_a_badly_written_function_is_refused_at_decoration():
    with pytest.raises(TypeError, match=r"last parameter must be \*\*options"):
        takes_options(lambda query, **kwargs: None)
    with pytest.raises(TypeError, match=r"\['scale'\] are options"):
        takes_options(lambda query, scale=None, **options: None)
    with pytest.raises(TypeError, match="names no option"):
        takes_options(without=("sink",))(lambda query, **options: None)


def test_the_options_are_the_rulebook_s_and_their_defaults_change_nothing():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 4, 5))
    explicit = impl.attention(q, k, v, **OPTIONS)
    assert np.array_equal(explicit, impl.attention(q, k, v))
    assert np.array_equal(
        oracle.attention(q, k, v, **OPTIONS).value, oracle.attention(q, k, v).value
    )


@pytest.mark.parametrize(
    ("function", "family"),
    [
        (oracle.cached_attention, CACHED_OPTIONS),
        (impl.cached_attention, CACHED_OPTIONS),
        (oracle.attention_with_kvcache, SERVING_OPTIONS),
        (impl.attention_with_kvcache, SERVING_OPTIONS),
    ],
    ids=lambda x: getattr(x, "__module__", "family"),
)
def test_the_cached_calls_list_exactly_their_family_of_options(function, family):
    parameters = inspect.signature(function).parameters
    assert [n for n in parameters if n in OPTIONS] == [n for n in OPTIONS if n in family]
    assert all(parameters[n].default == OPTIONS[n] for n in family)
    with pytest.raises(TypeError, match="unexpected keyword argument 'query_start'"):
        function(*[None] * 4, query_start=0)


def test_only_and_without_are_checked():
    with pytest.raises(TypeError, match="names no option"):
        takes_options(only=("scale", "sink"))(lambda query, **options: None)
    with pytest.raises(TypeError, match="not both"):
        takes_options(only=("scale",), without=("sinks",))(lambda query, **options: None)
