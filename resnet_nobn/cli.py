"""The command line of run/cifar_train.py and run/imagenet_train.py: one absl flag per option of
TrainConfig and ModelConfig, its default from a recipe (resnet_nobn/recipes.py).

`define_flags(recipe)` makes the flags from the dataclass fields (help, unit, bounds and choices are
the field's: resnet_nobn/config.py; absl enforces the bounds and choices while parsing, and
`advise` makes a refused --dataset of the other entry point name that entry point);
`config_from_flags` turns the parsed flags, once, into the frozen TrainConfig, whose checks are all
the others. Nothing else reads FLAGS. The training main (resnet_nobn/training/main.py) does all of this
before TensorFlow is imported, so a bad flag is said at once (one line, exit status 2).
`start(main)` is how every absl entry point under run/ (and bench/) starts: `parse_flags` says
absl's own errors (a flag that does not parse, a missing required flag, a flagfile that cannot be
read) and a `UsageError` in one line too.
"""
import dataclasses
import os
import re
import signal
import sys
import typing

from absl import flags

from resnet_nobn.data import image_folder
from resnet_nobn.config import ModelConfig, TrainConfig, options, resolve_init
from resnet_nobn.console import printable
from resnet_nobn.data.datasets import DATASETS, of_recipe
from resnet_nobn.errors import UserError
from resnet_nobn.options import flag_words

_RECIPE = []  # the recipe define_flags was given: config_from_flags starts from it


def flag_text(value):
    """A configuration value (or a config.json one) as its flag says it, the one formatter of
    flag values: 1.0 -> 1, (1, 2) and [1, 2] -> 1,2, True -> true."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, (list, tuple)):
        return ",".join(flag_text(v) for v in value)
    return str(value)


def departure_text(field, value, recipe_value):
    """How a run leaves the paper's recipe (resnet_nobn/paper.py `departures`), as its flag says it:
    ('learning_rate', 0.02, 0.05) -> '--learning_rate=0.02 (the paper's 0.05)';
    ('train_steps', 2000, 60000) -> '2,000 steps (the paper's 60,000)'."""
    if field == "train_steps":
        return f"{value:,} steps (the paper's {recipe_value:,})"
    return f"--{field}={flag_text(value)} (the paper's {flag_text(recipe_value)})"


def blocks_text(blocks, sep=","):
    """--blocks_per_stage as text: one number when every stage has it, else the stages' numbers
    joined by `sep`: (9, 9, 9) -> '9'; (3, 4, 6, 3) -> '3,4,6,3' (a study's names: '3-4-6-3')."""
    blocks = tuple(blocks)
    return str(blocks[0]) if len(set(blocks)) == 1 else sep.join(str(b) for b in blocks)


def parse_blocks(text, num_stages):
    """--blocks_per_stage text as the tuple of blocks per stage, the one parser of it: '3' ->
    (3,) * num_stages (one number for every stage); '3,4,6,3', '3-4-6-3' or '3:4:6:3' -> (3, 4,
    6, 3). ValueError for an entry that is not an integer; counts and bounds are the caller's."""
    try:
        blocks = tuple(int(p) for p in re.split(r",|:|(?<=\d)-(?=\d)", text) if p.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not one number of blocks for every stage (e.g. 3) nor one "
                         "per stage (e.g. 3-4-6)") from None
    return blocks * num_stages if len(blocks) == 1 else blocks


def define_flags(recipe: TrainConfig):
    """Defines one flag per option, defaulting to `recipe`'s value; --dataset chooses among the
    datasets the recipe's model is built for. They are key flags of the calling module (the entry
    point), so its --help lists them."""
    _RECIPE[:] = [recipe]
    caller = sys._getframe(1).f_globals["__name__"]
    caller = sys.argv[0] if caller == "__main__" else caller  # absl's name of the main module
    for owner, f in ([(recipe.model, f) for f in options(ModelConfig)]
                     + [(recipe, f) for f in options(TrainConfig)]):
        m = f.metadata
        if not _applies(f, recipe):
            continue
        value = getattr(owner, f.name)
        text = (blocks_text(value) if m.get("one_for_all") else flag_text(value)
                if isinstance(value, tuple) else value)
        default = m.get("flag_default", text)
        help_text = " ".join([m["help"], *(sentence for dataset, sentence in m.get("help_for", ())
                                           if dataset in _datasets_of(recipe))])
        help_text += f" [{m['unit']}]" if m["unit"] else ""
        choices = _datasets_of(recipe) if f.name == "dataset" else m.get("flag_choices", m["choices"])
        if choices:
            flags.DEFINE_enum(f.name, default, choices, help_text)
            if f.name == "dataset":  # another recipe's dataset: its entry point says the fix
                advise("dataset", {d.name: f"train it with python {d.entry_point}"
                                   for d in DATASETS.values() if d.name not in choices})
        elif isinstance(f.default, bool):
            flags.DEFINE_bool(f.name, default, help_text)
        elif isinstance(f.default, int) or int in typing.get_args(f.type):  # int, int | None
            flags.DEFINE_integer(f.name, default, help_text, lower_bound=m["lower"],
                                 upper_bound=m["upper"])
        elif isinstance(f.default, float) or float in typing.get_args(f.type):  # float | None
            flags.DEFINE_float(f.name, default, help_text, lower_bound=m["lower"],
                               upper_bound=m["upper"])
        else:  # strings, and tuples as comma lists
            flags.DEFINE_string(f.name, default, help_text)
        flags.FLAGS.register_key_flag_for_module(caller, flags.FLAGS[f.name])


class _AdvisedEnum(flags.EnumParser):
    """absl's enum parser, whose refusal of a value in `advice` ends with its fix."""

    def __init__(self, parser, advice):
        super().__init__(parser.enum_values, parser.case_sensitive)
        self.advice = advice

    def parse(self, argument):
        try:
            return super().parse(argument)
        except ValueError as e:
            if argument in self.advice:
                raise ValueError(f"{e}; {self.advice[argument]}") from None
            raise


def advise(name, advice):
    """Makes the refusal of enum flag --name's value v also say advice[v], the fix (a value of
    another entry point's: `{"imagenet2012": "train it with python run/imagenet_train.py"}`)."""
    flag = flags.FLAGS[name]
    flag.parser = _AdvisedEnum(flag.parser, advice)


def _datasets_of(recipe):
    """The datasets `recipe`'s entry point trains (resnet_nobn/data/datasets.py): its --dataset
    choices."""
    return of_recipe(DATASETS[recipe.dataset].recipe)


def _applies(field, recipe):
    """Whether a field is an option of `recipe`'s entry point: one read for some datasets only
    (`only_for`, e.g. CIFAR's crop padding) is not offered where none of them can be trained."""
    only_for = field.metadata.get("only_for")
    return not only_for or bool(set(only_for) & set(_datasets_of(recipe)))


def _value(field, text, num_stages=None):
    """The config value of a flag: comma lists become tuples of ints, and --blocks_per_stage one
    number for each of `num_stages` stages if it is one number (`parse_blocks`)."""
    if not isinstance(field.default, tuple):
        return text
    try:
        if field.metadata.get("one_for_all"):
            return parse_blocks(text, num_stages)
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise ValueError(f"--{field.name} {field.metadata['check'][1]}") from None


def config_from_flags(FLAGS) -> TrainConfig:
    """The parsed flags, once, as the frozen run configuration; UserError if they make none. For
    --dataset=image_folder the class names and count are --data_dir's, read here
    (resnet_nobn/data/image_folder.py), before TensorFlow loads."""
    (recipe,) = _RECIPE
    try:
        fields = [f for f in options(ModelConfig) if _applies(f, recipe)]
        model = {f.name: _value(f, FLAGS[f.name].value) for f in fields
                 if not f.metadata.get("one_for_all")}
        model.update({f.name: _value(f, FLAGS[f.name].value, len(model["widths"])) for f in fields
                      if f.metadata.get("one_for_all")})  # one number for every stage
        info = DATASETS[FLAGS.dataset]
        names = image_folder.class_names(FLAGS.data_dir) if info.folder else ()  # read once
        model.update(num_classes=len(names) if info.folder else info.num_classes,
                     image_size=info.image_size, init=resolve_init(model["init"], model["norm"]))
        train = {f.name: _value(f, FLAGS[f.name].value) for f in options(TrainConfig)
                 if _applies(f, recipe)}
        for name in ("model_dir", "data_dir"):  # config.json says where, from any directory
            if (train.get(name) or "").strip():
                train[name] = os.path.abspath(train[name])
        return dataclasses.replace(
            recipe, model=dataclasses.replace(recipe.model, **model), class_names=names, **train)
    except ValueError as e:  # the checks of config.py, in the words of the command line
        raise UserError(flag_words(e)) from None


def start(entry_main, takes_arguments=False):
    """absl's `app.run(entry_main)` for every entry point under run/, with `parse_flags` as its
    flag parser (arguments that are not flags refused unless `takes_arguments`) and an
    `app.UsageError` raised by `entry_main` said in one line (exit status 2) instead of absl's
    usage text and exit status 1."""
    from absl import app

    def one_line_usage(argv):
        try:
            return entry_main(argv)
        except app.UsageError as e:
            _refuse(str(e))
    app.run(one_line_usage, flags_parser=lambda argv: parse_flags(argv, takes_arguments))


def _refuse(problem):
    print(f"error: {printable(problem)} (--helpfull lists every flag)", file=sys.stderr,
          flush=True)
    sys.exit(2)


def expand_home(argv):
    """`--flag=~/x` as the shell gives `--flag ~/x`: bash expands a `~` only at the start of a
    word, so a path after `=` would otherwise name a directory called `~` in the current one."""
    return [re.sub(r"^(--?\w+=)(~[^/]*)", lambda m: m[1] + os.path.expanduser(m[2]), a)
            for a in argv]


HELP = {"--help": False, "-h": False, "-?": False, "--helpshort": False, "--helpfull": True}


def _help(full):
    """The entry point's help on stdout, exit status 0: its docstring and its own flags first;
    with --helpfull then every other module's flags (absl's own last of all)."""
    main, values = sys.argv[0], flags.FLAGS
    text = (sys.modules["__main__"].__doc__ or f"usage: {main} [flags]\n").rstrip("\n")
    text += "\n\nflags:\n\n" + values.module_help(main).strip("\n")
    if full:
        shown = {f.name for f in values.get_key_flags_for_module(main)}
        others = sorted((m for m, fs in values.flags_by_module_dict().items()
                         if m != main and {f.name for f in fs} - shown),  # not shown above
                        key=lambda m: (m.startswith("absl."), m))
        text += "".join("\n\n" + values.module_help(m).strip("\n") for m in others)
    else:
        text += "\n\n--helpfull lists every other flag too (absl's own)."
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `--help | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
    sys.exit(0)


def parse_flags(argv, takes_arguments=False):
    """absl's `flags_parser` for every entry point: a flag that does not parse or breaks its
    bounds, a missing required flag, a flagfile that cannot be read or is not text, or an argument
    that is not a flag is one line on stderr and exit status 2, like every other bad input
    (absl's own parser prints several lines and exits 1). `~` is expanded after `=`
    (`expand_home`). --help (`_help`) prints the help and exits 0, not absl's 1."""
    argv = argv[:1] + expand_home(argv[1:])
    asked = [a.split("=")[0] for a in argv[1:] if a.split("=")[0] in HELP]
    if asked:
        _help(full=any(HELP[a] for a in asked))
    try:
        rest = flags.FLAGS(argv)
    except flags.Error as e:
        problem = " ".join(str(e).removeprefix("ERROR:: ").split())
        missing = re.findall(r"flag --(\w+)=None: Flag --\1 must have a value other than None",
                             problem)  # absl's words for a required flag not given
        if missing:
            problem = (f"missing {', '.join('--' + m for m in missing)}: give "
                       f"{'it' if len(missing) == 1 else 'them'} a value")
        _refuse(problem)
    except UnicodeDecodeError as e:  # absl reads a --flagfile as UTF-8 text
        _refuse(f"--flagfile: not a text file of flags ({e.reason} at byte {e.start}); give a "
                "file with one --flag=value per line")
    if len(rest) > 1 and not takes_arguments:
        _refuse(f"unexpected arguments: {' '.join(rest[1:])}")
    return rest


def main_wrapper(run, interrupted="interrupted; re-run the same command to resume from the last "
                 "checkpoint"):
    """Runs `run()`; a UserError becomes its line on stderr (control characters escaped) and exit
    status 2, Ctrl-C the line `interrupted` and exit 130, a reader of stdout gone (`| head`) a
    quiet exit 141, as of a program the shell's SIGPIPE ended."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the entry point's start-up handler
    try:
        run()
    except UserError as e:
        lines = str(e).split("\n")  # a divergence's second line: its `retry with:` advice
        print("error: " + "\n".join(map(printable, lines)), file=sys.stderr, flush=True)
        sys.exit(2)
    except BrokenPipeError:  # the reader has what it wanted; nothing more to say, nor at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(128 + signal.SIGPIPE)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr, flush=True)
        sys.exit(130)
