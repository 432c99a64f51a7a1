"""Every public symbol has the docstring a reader of `help()` needs, and its examples run.

The public symbols are `resnet_nobn.__all__`, each public module's `__all__`, and each public
class's public methods defined in the project. Each docstring has `Args:` (where it takes
arguments), `Returns:` (where it returns a value) and `Example`; `pydoc.render_doc` shows it; and
each ```python block of it runs, in this process.
"""
import ast
import inspect
import pydoc
import re
import textwrap

import pytest

import resnet_nobn


def public_symbols(package=resnet_nobn):
    """{dotted name: object} of every public symbol reachable from `package.__all__`."""
    out = {}

    def add(name, obj):
        out[name] = obj
        if inspect.ismodule(obj):
            for n in obj.__all__:  # a public module says what it offers
                add(f"{name}.{n}", getattr(obj, n))
        elif inspect.isclass(obj):
            for n, v in vars(obj).items():
                v = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                if (not n.startswith("_") and inspect.isfunction(v)
                        and v.__module__.startswith(package.__name__)):
                    out[f"{name}.{n}"] = v
    for name in package.__all__:
        add(f"{package.__name__}.{name}", getattr(package, name))
    return out


def own_doc(obj):
    """The object's own docstring (not one inherited, as `inspect.getdoc` would give)."""
    return inspect.cleandoc(obj.__doc__ or "")


def takes_arguments(obj):
    if inspect.ismodule(obj):
        return False
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    return any(p not in ("self", "cls") for p in params)


def returns_value(obj):
    """Whether a function's own body has `return <value>` (a class or module: no)."""
    if not inspect.isfunction(obj):
        return False
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    body = tree.body[0]
    nested = {id(n) for f in ast.walk(body) if f is not body and isinstance(
        f, (ast.FunctionDef, ast.Lambda)) for n in ast.walk(f)}
    return any(isinstance(n, ast.Return) and n.value is not None and id(n) not in nested
               for n in ast.walk(body))


def missing_sections(obj):
    """The sections `obj`'s docstring lacks, as ["Args:", ...]; [] where it has them all and
    `pydoc.render_doc` shows it."""
    doc = own_doc(obj)
    wanted = (["Args:"] * takes_arguments(obj) + ["Returns:"] * returns_value(obj)
              + ["Example"])
    missing = [s for s in wanted if s not in doc]
    rendered = pydoc.render_doc(obj, renderer=pydoc.plaintext)
    if not doc or " ".join(doc.splitlines()[0].split()) not in " ".join(rendered.split()):
        missing.append("(shown by help())")
    return missing


def examples(obj):
    """The ```python blocks of `obj`'s docstring."""
    return re.findall(r"```python\n(.*?)```", own_doc(obj), re.S)


SYMBOLS = public_symbols()


def test_the_public_symbols_are_found():
    names = set(SYMBOLS)
    assert {"resnet_nobn.ModelConfig", "resnet_nobn.ModelConfig.replace",
            "resnet_nobn.TrainConfig.from_json", "resnet_nobn.recipes.scaled",
            "resnet_nobn.StepSchedule.of", "resnet_nobn.Standardize.call",
            "resnet_nobn.train"} <= names
    assert not {n for n in names if n.split(".")[-1].startswith("_")}


def test_every_public_symbol_has_args_returns_and_an_example():
    assert {name: missing_sections(obj) for name, obj in SYMBOLS.items()
            if missing_sections(obj)} == {}


def test_a_docstring_without_its_sections_is_found():
    def documented(x):
        """Doubles.

        Args:
            x: a number.

        Returns:
            2 x.

        Example:

        ```python
        assert 2 * 2 == 4
        ```
        """
        return 2 * x

    def bare(x):
        """Doubles."""
        return 2 * x
    assert missing_sections(documented) == []
    assert missing_sections(bare) == ["Args:", "Returns:", "Example"]


def test_the_config_classes_list_every_field_with_the_flags_text():
    from resnet_nobn.config import ModelConfig, TrainConfig
    for cls in (ModelConfig, TrainConfig):
        doc = " ".join(own_doc(cls).split())
        for f in cls.__dataclass_fields__.values():  # the help's text up to its first --flag
            assert f"{f.name}: " in doc and f.metadata["help"].split("--")[0][:40] in doc, f.name
    text = pydoc.render_doc(resnet_nobn.ModelConfig, renderer=pydoc.plaintext)
    text = " ".join(re.sub(r"^ \|", "", text, flags=re.M).split())  # help()'s margin
    assert ("stem_width: int. Output channels of the first, standard conv. Unit: channels. "
            "Default: `16`. At least 1.") in text
    assert "num_classes: int. Classes of the dataset" in text


def test_help_of_recipes_lists_only_its_public_functions():
    text = pydoc.render_doc(resnet_nobn.recipes, renderer=pydoc.plaintext)
    sections = re.findall(r"^([A-Z]+)$", text, re.M)
    assert sections == ["NAME", "DESCRIPTION", "FUNCTIONS", "DATA", "FILE"]
    functions, data = text.split("\nFUNCTIONS\n")[1].split("\nFILE\n")[0].split("\nDATA\n")
    assert data.split() == ["__all__", "=", "['cifar',", "'imagenet',", "'optimizer',", "'scaled']"]
    assert re.findall(r"^    (\w+)\(", functions, re.M) == ["cifar", "imagenet", "optimizer",
                                                             "scaled"]


@pytest.mark.parametrize("name", [n for n, obj in SYMBOLS.items() if examples(obj)])
def test_the_examples_run(name, tmp_path, monkeypatch, request):
    """Each example as written, in a directory of its own; tfds' default data directory is the
    session's slice of the real Fashion-MNIST where an example reads it (load_dataset's), else
    one of its own: never the user's."""
    import tensorflow_datasets as tfds
    monkeypatch.chdir(tmp_path)
    code = "".join(examples(SYMBOLS[name]))
    data = (request.getfixturevalue("fashion_mnist_slice") if 'load_dataset("fashion_mnist"' in code
            else str(tmp_path / "tensorflow_datasets"))
    monkeypatch.setattr(tfds.core.constants, "DATA_DIR", data)
    for code in examples(SYMBOLS[name]):
        exec(compile(code, f"<{name} example>", "exec"), {"__name__": "__example__"})
