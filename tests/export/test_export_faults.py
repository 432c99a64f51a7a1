"""Bad input to run/export.py and run/predict.py: --overwrite never deletes what an export did not
write (a run, the directory around runs, any other directory), two exports into one directory
do not both succeed, an export is checked before it is used (export.json against saved_model/,
labels.txt), names reach the terminal escaped, and an image is measured from its header before it
is decoded (resnet_nobn/export/writer.py, resnet_nobn/export/predict.py)."""
import hashlib
import io
import json
import os
import re
import shutil
import struct
import zlib

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from resnet_nobn.data import images
from resnet_nobn.errors import UserError
from resnet_nobn.export import predict, writer
from tests.helpers import ROOT, copy_of, run_main, start_cli

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def made(tmp_path_factory, finished_run):
    """The session's tiny run (checkpoints 0, 2, 4; conftest.py) copied to runs/run, and its
    export of ckpt-4 and of ckpt-2."""
    root = tmp_path_factory.mktemp("made")
    run_dir = copy_of(finished_run, root / "runs" / "run")
    writer.export(str(run_dir), str(root / "exp4"), log=lambda _: None)
    writer.export(str(run_dir), str(root / "exp2"), checkpoint=2, log=lambda _: None)
    return root


def _tree(path):
    """{relative path: sha256 of its bytes (None for a directory)} of everything under path."""
    out = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), path)] = None
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = hashlib.sha256(open(full, "rb").read()).hexdigest()
    return out


def _one_line_error(p):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    return lines[0]


@pytest.mark.parametrize("target,expected", [
    ("runs/run", "is the run directory"),
    ("runs", "contains the run directory"),
    ("runs/run/ckpt", "is inside the run directory"),
    ("other", "is not an export (no export.json"),
    ("exp_with_notes", "holds notes.txt, which run/export.py does not write"),
    ("exp_with_nested", "holds saved_model/mine, which run/export.py does not write"),
])
def test_overwrite_deletes_nothing_but_an_earlier_export(tmp_path, made, target, expected):
    """--overwrite on the run directory, its parent (a study root), a directory inside the run,
    an unrelated directory and an export holding a file of the user: refused, before any work,
    with every file kept."""
    shutil.copytree(made / "runs", tmp_path / "runs")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "thesis.tex").write_text("years of work")
    for name, extra in (("exp_with_notes", "notes.txt"), ("exp_with_nested", "saved_model/mine")):
        shutil.copytree(made / "exp4", tmp_path / name)
        (tmp_path / name / extra).write_text("mine")
    before, said = _tree(tmp_path), []
    with pytest.raises(UserError, match=re.escape(expected)):
        writer.export(str(tmp_path / "runs" / "run"), str(tmp_path / target), overwrite=True,
                      log=said.append)
    assert said == []  # refused before any work
    assert _tree(tmp_path) == before


@pytest.mark.slow
def test_overwrite_of_the_run_directory_is_one_line_from_the_command(tmp_path, made):
    shutil.copytree(made / "runs", tmp_path / "runs")
    before = _tree(tmp_path)
    for target in ("runs/run", "runs", "runs/run/"):
        p = run_main("export.py", f"--model_dir={tmp_path}/runs/run",
                    f"--export_dir={tmp_path}/{target}", "--overwrite", timeout=120)
        assert "--model_dir" in _one_line_error(p)
    assert _tree(tmp_path) == before


def test_overwrite_replaces_an_earlier_export(tmp_path, made):
    shutil.copytree(made / "exp2", tmp_path / "exp")
    assert writer.export(str(made / "runs" / "run"), str(tmp_path / "exp"), overwrite=True,
                         log=lambda _: None) == 4
    assert json.loads((tmp_path / "exp" / "export.json").read_text())["step"] == 4
    assert sorted(os.listdir(tmp_path)) == ["exp"]


def test_of_two_exports_into_one_new_directory_one_is_refused(tmp_path, made, monkeypatch):
    """The second export finishes while the first is still writing: the first is refused when it
    would put its export in place, and the second's stays whole."""
    target, run_dir = tmp_path / "new" / "exp", str(made / "runs" / "run")
    write = writer._write

    def write_then_be_overtaken(tmp, *args):
        write(tmp, *args)
        monkeypatch.setattr(writer, "_write", write)
        assert writer.export(run_dir, str(target), checkpoint=2, log=lambda _: None) == 2

    monkeypatch.setattr(writer, "_write", write_then_be_overtaken)
    with pytest.raises(UserError, match="was written by another export while this one ran"):
        writer.export(run_dir, str(target), log=lambda _: None)
    assert json.loads((target / "export.json").read_text())["step"] == 2
    predict.read_export(str(target))  # whole and consistent
    assert sorted(os.listdir(tmp_path / "new")) == ["exp"]  # no temporary left


@pytest.mark.parametrize("results, why", [
    ('{"global_step": 4, "top1_error": "0.5"', "is not a JSON object"),
    (None, "is not a run's results (history step 4: top1_error is a string, not a number)")])
def test_a_results_json_that_is_not_a_runs_is_said_and_the_card_takes_nothing_from_it(
        tmp_path, made, results, why):
    """The card's error was read from any results.json: a number written as a string ended the
    export in a traceback, and a file that is not JSON gave a card saying nothing was evaluated."""
    run = tmp_path / "run"
    shutil.copytree(made / "runs" / "run", run)
    if results is None:  # the run's own, with the evaluation of step 4 written as a string
        record = json.loads((run / "results.json").read_text())
        record["history"][-1]["top1_error"] = str(record["history"][-1]["top1_error"])
        results = json.dumps(record)
    (run / "results.json").write_text(results)
    said = []
    writer.export(str(run), str(tmp_path / "exp"), log=said.append)
    assert said[0] == (f"warning: {run / 'results.json'} {why}: the model card gives no error "
                       "nor anything else from it")
    card = (tmp_path / "exp" / "model_card.md").read_text()
    assert f"- No error is given for this checkpoint: the run's results.json {why}." in card
    assert "Top-1 error" not in card


def test_a_path_tensorflow_would_glob_is_refused_before_any_work(tmp_path, made):
    run_dir = made / "runs" / "run"
    for name in ("exp[1]", "exp*", "what?"):
        p = run_main("export.py", f"--model_dir={run_dir}", f"--export_dir={tmp_path / name}",
                    timeout=120)
        assert "glob pattern" in _one_line_error(p)
    assert os.listdir(tmp_path) == []
    shutil.copytree(made / "exp4", tmp_path / "e[1]")  # an export renamed so
    with pytest.raises(UserError, match=r"contains \[, \], \* or \?.*rename the directory"):
        predict.read_export(str(tmp_path / "e[1]"))


def _png(tmp_path, name, array):
    path = tmp_path / name
    path.write_bytes(tf.io.encode_png(array).numpy())
    return str(path)


@pytest.mark.slow
def test_a_reader_that_stops_reading_ends_predict_quietly(tmp_path, made):
    """`predict.py ... | head -1`: the reader gone, predict ended in a BrokenPipeError traceback."""
    image = _png(tmp_path, "a.png", np.zeros((32, 32, 3), np.uint8))
    proc = start_cli("predict.py", f"--export_dir={made / 'exp4'}", image)
    proc.stdout.close()  # before it prints: it loads TensorFlow first
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (141, "")


@pytest.mark.slow
def test_label_names_reach_the_terminal_escaped(tmp_path, made):
    exp = tmp_path / "exp"
    shutil.copytree(made / "exp4", exp)
    names = [f"\x1b[2J\x1b]0;pwned\x07class{i}\u202e" for i in range(10)]
    (exp / "labels.txt").write_text("".join(n + "\n" for n in names), encoding="utf-8")
    image = _png(tmp_path, "a\x1bb.png", np.zeros((32, 32, 3), np.uint8))
    p = run_main("predict.py", f"--export_dir={exp}", image, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout and "\u202e" not in p.stdout
    assert "\\x1b[2J\\x1b]0;pwned\\x07class" in p.stdout and "\\u202e (class" in p.stdout
    assert p.stdout.splitlines()[0] == f"{tmp_path}/a\\x1bb.png"


@pytest.mark.slow
def test_an_error_line_escapes_the_names_it_quotes(tmp_path, made):
    """The error lines printed a file or directory name raw: escape sequences reached the terminal."""
    bad = tmp_path / "t\x1b]0;x\x07.png"
    bad.write_text("not an image")
    for script, args in (("predict.py", [f"--export_dir={made / 'exp4'}", str(bad)]),
                         ("export.py", [f"--model_dir={tmp_path / 'no'}\x1b]0;x\x07",
                                        f"--export_dir={tmp_path / 'e'}"])):
        p = run_main(script, *args, timeout=120)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "\x1b" not in p.stderr and "\x07" not in p.stderr, p.stderr
        assert "\\x1b]0;x\\x07" in p.stderr, p.stderr


def test_a_file_a_file_manager_added_to_saved_model_does_not_void_the_export(tmp_path, made):
    """The digest covers the files an export writes (what TensorFlow loads): a .DS_Store that
    Finder left in saved_model/ made a valid export \"not match\" its export.json."""
    exp = tmp_path / "exp"
    shutil.copytree(made / "exp4", exp)
    for where in ("saved_model", "saved_model/variables"):
        (exp / where / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    assert predict.read_export(str(exp))[0]["step"] == 4


def test_labels_saved_by_an_editor_with_a_byte_order_mark_are_read_as_written(tmp_path, made):
    """The BOM of a labels.txt an editor saved as "UTF-8 with BOM" was the start of class 0's
    name, printed as '\\ufeffc0'."""
    exp = tmp_path / "exp"
    shutil.copytree(made / "exp4", exp)
    (exp / "labels.txt").write_text("".join(f"c{i}\r\n" for i in range(10)), encoding="utf-8-sig")
    assert predict.read_export(str(exp))[1] == [f"c{i}" for i in range(10)]


@pytest.mark.slow
@pytest.mark.parametrize("case,expected", [
    ("labels_latin1", "labels.txt is not UTF-8 text"),
    ("labels_short", "labels.txt has 9 lines, the model 10 classes"),
    ("image_size", "export.json does not match saved_model/"),
    ("input_kind", "export.json does not match saved_model/"),
    ("num_classes", "export.json does not match saved_model/"),
    ("copied_saved_model", "export.json does not match saved_model/"),
    ("truncated_variables", "export.json does not match saved_model/"),
    ("field_missing", "export.json is not an export description"),
    ("field_type", "export.json is not an export description"),
    ("not_json", "export.json is unreadable or not JSON"),
    ("no_digest", "export.json is not an export description of run/export.py (digest missing"),
])
def test_an_export_that_is_not_what_it_says_is_refused_in_one_line(tmp_path, made, case,
                                                                    expected):
    exp = tmp_path / "exp"
    shutil.copytree(made / "exp4", exp)
    meta_path = exp / "export.json"
    meta = json.loads(meta_path.read_text())
    if case == "labels_latin1":
        (exp / "labels.txt").write_bytes("".join(f"cl\xe4sse {i}\n" for i in range(10))
                                         .encode("latin-1"))
    elif case == "labels_short":
        (exp / "labels.txt").write_text("".join(f"c{i}\n" for i in range(9)))
    elif case in ("image_size", "input_kind", "num_classes", "field_missing", "field_type",
                  "no_digest"):
        change = dict(image_size=dict(image_size=28), input_kind=dict(input="encoded"),
                      num_classes=dict(num_classes=100), field_type=dict(image_size="32"),
                      ).get(case, {})
        meta.update(change)
        if case in ("field_missing", "no_digest"):
            del meta["num_classes" if case == "field_missing" else "digest"]
        meta_path.write_text(json.dumps(meta))
    elif case == "copied_saved_model":  # another checkpoint of the same run: same shapes
        shutil.rmtree(exp / "saved_model")
        shutil.copytree(made / "exp2" / "saved_model", exp / "saved_model")
    elif case == "truncated_variables":
        data = next((exp / "saved_model" / "variables").glob("variables.data-*"))
        data.write_bytes(data.read_bytes()[:100])
    elif case == "not_json":
        meta_path.write_text("{")
    image = _png(tmp_path, "a.png", np.zeros((32, 32, 3), np.uint8))
    p = run_main("predict.py", f"--export_dir={exp}", image, timeout=120)
    assert expected in _one_line_error(p)
    assert p.stdout == ""


def _big_png(path, width, height):
    """A valid 8-bit grey PNG of width x height black pixels, written without holding them."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    z, row, body = zlib.compressobj(1), b"\0" * (width + 1), []
    for _ in range(height):
        body.append(z.compress(row))
    body.append(z.flush())
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height,
                                                                          8, 0, 0, 0, 0))
                     + chunk(b"IDAT", b"".join(body)) + chunk(b"IEND", b""))
    return str(path)


def _gif(width, height, frames=1):
    """A GIF of `frames` 1x1 images on a width x height screen (a 2-colour table)."""
    image = b",\0\0\0\0\1\0\1\0\0\2\2D\1\0"
    return (b"GIF89a" + struct.pack("<HH", width, height) + b"\x80\0\0\0\0\0\xff\xff\xff"
            + b"!\xf9\4\1\0\0\0\0" + image * frames + b";")


def _bmp(width, height):
    """A 24-bit BMP of width x height grey pixels."""
    row = b"\x80" * (3 * width) + b"\0" * (-3 * width % 4)
    pixels = row * height
    return (b"BM" + struct.pack("<IHHI", 54 + len(pixels), 0, 0, 54)
            + struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 0, 0, 0, 0)
            + pixels)


@pytest.mark.slow
def test_an_image_past_the_pixel_limit_is_refused_before_decoding(tmp_path, made):
    """A 1 MB PNG that decodes to 60 million pixels (as today's decode_image would, in full)."""
    big = _big_png(tmp_path / "big.png", 10_000, 6_000)
    assert os.path.getsize(big) < 2_000_000
    p = run_main("predict.py", f"--export_dir={made / 'exp4'}", "--resize", big, timeout=120)
    line = _one_line_error(p)
    assert f"big.png is a PNG of 10000x6000 pixels, more than predict's limit of " \
           f"{predict.MAX_PIXELS:,} pixels" in line, line


def test_every_format_is_measured_from_its_header(tmp_path):
    jpeg = bytearray(tf.io.encode_jpeg(np.zeros((16, 24, 3), np.uint8)).numpy())
    sof = jpeg.index(b"\xff\xc0")
    assert images.header_size(bytes(jpeg)) == ("JPEG", 24, 16, 1)
    jpeg[sof + 5:sof + 9] = struct.pack(">HH", 30_000, 40_000)  # a header that lies
    assert images.header_size(bytes(jpeg)) == ("JPEG", 40_000, 30_000, 1)
    assert images.header_size(_gif(7, 5, frames=3)) == ("GIF", 7, 5, 3)
    assert images.header_size(_bmp(6, 4)) == ("BMP", 6, 4, 1)
    webp = io.BytesIO()
    Image.new("RGB", (100, 50)).save(webp, format="WEBP", lossless=True)
    assert images.header_size(webp.getvalue()) == ("WebP", 100, 50, 1)
    assert images.header_size(b"not an image") is None
    meta = dict(image_size=32, input="pixels", dataset="cifar10")
    for name, raw in (("huge.gif", _gif(8000, 8000)), ("many.gif", _gif(2000, 2000, frames=13)),
                      ("huge.bmp", _bmp(1, 1)[:18] + struct.pack("<ii", 9000, -9000)
                       + _bmp(1, 1)[26:]), ("huge.jpg", bytes(jpeg))):
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(UserError, match=f"{name} is a .* pixels.*more than predict's limit"):
            predict.read_images([str(tmp_path / name)], meta, resize=True)


def test_gif_bmp_16_bit_grey_and_rgba_images_still_work(tmp_path):
    rng = np.random.default_rng(0)
    files = [_png(tmp_path, "grey.png", rng.integers(0, 256, (32, 32, 1)).astype(np.uint8)),
             _png(tmp_path, "rgba.png", rng.integers(0, 256, (32, 32, 4)).astype(np.uint8)),
             _png(tmp_path, "deep.png", rng.integers(0, 65536, (20, 30, 3)).astype(np.uint16))]
    for name, raw in (("one.gif", _gif(1, 1)), ("frames.gif", _gif(1, 1, frames=2)),
                      ("grey.bmp", _bmp(6, 4))):
        (tmp_path / name).write_bytes(raw)
        files.append(str(tmp_path / name))
    inputs, notes = predict.read_images(files, dict(image_size=32, input="pixels",
                                                    dataset="cifar10"), resize=True)
    assert inputs.shape == (6, 32, 32, 3) and inputs.dtype == tf.uint8
    assert notes[:2] == ["", ""] and notes[2] == " (resized from 30x20 to 32x32)"
    assert notes[5] == " (resized from 6x4 to 32x32)"


def test_a_grey_model_reads_every_format_as_grey(tmp_path):
    """Fashion-MNIST's export serves 28x28x1 pixels: a GIF, BMP or WebP (which TensorFlow decodes
    in colour only) was refused as damaged; a grey file gives its own pixels, whatever its format."""
    pixels = np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8)
    files = []
    for fmt, mode in (("PNG", "L"), ("GIF", "L"), ("BMP", "L"), ("BMP", "RGB"), ("WEBP", "RGB")):
        path = tmp_path / f"{mode}.{fmt.lower()}"
        Image.fromarray(pixels).convert(mode).save(path, format=fmt,
                                                   **({"lossless": True} if fmt == "WEBP" else {}))
        files.append(str(path))
    inputs, _ = predict.read_images(files, dict(image_size=28, input="pixels",
                                                dataset="fashion_mnist"))
    assert inputs.shape == (5, 28, 28, 1) and inputs.dtype == tf.uint8
    for image in inputs.numpy():
        np.testing.assert_array_equal(image[..., 0], pixels)


def test_the_card_and_the_docs_say_how_to_load_model_keras_and_the_pixel_limit(made):
    load = ['import keras, resnet_nobn  # resnet_nobn registers its Keras classes',
            'model = keras.saving.load_model("EXPORT_DIR/model.keras")']
    card = (made / "exp4" / "model_card.md").read_text()
    docs = open(os.path.join(ROOT, "docs", "export.md")).read()
    for line in load:
        assert f"\n{line}\n" in card and f"\n  {line}\n" in docs, line
    assert f"more than {predict.MAX_PIXELS:,} pixels" in docs


def test_an_imagenet_model_refuses_a_format_its_graph_does_not_decode(tmp_path):
    """The ImageNet graph decodes with tf.io.decode_jpeg, as evaluation does: JPEG, PNG and a GIF
    of one frame. A WebP passed the check and failed inside the SavedModel (a traceback); a BMP or
    an animated GIF was called damaged."""
    pixels = np.random.default_rng(0).integers(0, 256, (40, 30, 3)).astype(np.uint8)
    webp = io.BytesIO()
    Image.fromarray(pixels).save(webp, format="WEBP")
    meta = dict(image_size=224, input="encoded", dataset="imagenet2012")
    for name, raw, kind in (("photo.webp", webp.getvalue(), "WebP"),
                            ("grey.bmp", _bmp(6, 4), "BMP"),
                            ("frames.gif", _gif(1, 1, frames=2), "GIF of 2 frames")):
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(UserError, match=f"{name} is a {kind}; the imagenet2012 model decodes "
                                            "JPEG, PNG and one-frame GIF files, as its evaluation "
                                            "does: convert it to JPEG or PNG"):
            predict.read_images([str(tmp_path / name)], meta)
    (tmp_path / "one.gif").write_bytes(_gif(1, 1))
    (tmp_path / "a.png").write_bytes(tf.io.encode_png(pixels).numpy())
    inputs, _ = predict.read_images([str(tmp_path / "one.gif"), str(tmp_path / "a.png")], meta)
    assert inputs.dtype == tf.string and inputs.shape == (2,)


def test_an_imagenet_model_refuses_an_image_its_resize_would_make_too_large(tmp_path):
    """The graph resizes the shorter side to 256 (evaluation's): a 2000x1 strip becomes 512,000 x
    256 pixels, past MAX_PIXELS, and was decoded and resized inside the SavedModel (gigabytes)."""
    meta = dict(image_size=224, input="encoded", dataset="imagenet2012")
    strip = tmp_path / "strip.png"
    strip.write_bytes(tf.io.encode_png(tf.zeros([1, 2000, 3], tf.uint8)).numpy())
    with pytest.raises(UserError, match=r"strip.png is 2000x1 pixels: its shorter side resized to "
                                        r"256, .* crop it closer to square first"):
        predict.read_images([str(strip)], meta)
    square = tmp_path / "square.png"
    square.write_bytes(tf.io.encode_png(tf.zeros([300, 400, 3], tf.uint8)).numpy())
    assert predict.read_images([str(square)], meta)[0].shape == (1,)
