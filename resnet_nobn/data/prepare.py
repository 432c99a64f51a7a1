"""Getting a dataset into a tfds data directory, or saying in one line why it cannot be.

The datasets the CIFAR input reads (resnet_nobn/data/datasets.py) are prepared by tfds' own builders:
downloaded, or for Fashion-MNIST built from the idx files Debian installs, without network
(resnet_nobn/data/fashion_mnist.py). run/prepare_data.py prepares into any directory; a training
run without --data_dir prepares into tfds' default one the same way, and with --data_dir prepares
nothing. A download that fails is said in one line within seconds (tfds' retries lowered, every
network wait bounded: resnet_nobn/data/download.py) that names the routes needing no internet,
and leaves nothing behind: what it made in the data directory (the dataset's directory, tfds'
download and extraction directories, partial `*.tmp.*` files, the directory itself) is removed
(`leaves_nothing`). ImageNet is built from the ILSVRC archives placed by hand (`imagenet_builder`).
The training inputs (cifar.py, imagenet.py) and run/prepare_data.py get their builders here.
"""
import contextlib
import io
import os
import re
import shutil
import tarfile

from resnet_nobn.console import log
from resnet_nobn.data import download, fashion_mnist, tfds_dir
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.errors import UserError, first_line, prepare_data_command
from resnet_nobn.files import atomic_file

DOWNLOAD_RETRIES = 3  # tfds' retries of a failed download request (its default 10: 204 s offline)


def tfds_builder(name, data_dir):
    """The tfds builder of `name` in `data_dir` (None: tfds' default), prepared or not; UserError if
    `data_dir` is not a directory or holds damaged files of the dataset."""
    import tensorflow_datasets as tfds
    if data_dir is not None and not os.path.isdir(data_dir):
        raise UserError(f"--data_dir={data_dir} is not a directory; create it with "
                        f"`{prepare_data_command(name, data_dir)}` or point it at a tfds data dir")
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        builder.is_prepared()
    except Exception as e:  # noqa: BLE001 -- a damaged dataset_info.json and the like
        if data_dir is not None:
            tfds_dir.check_readable(name, data_dir)  # the damaged file and a fix that works
        raise UserError(f"the {name} files in --data_dir={data_dir} are damaged ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:120] if str(e) else ''}); delete them and "
                        f"prepare it again with `{prepare_data_command(name, data_dir)}`") from None
    return builder


def prepared_builder(name, data_dir):
    """A prepared tfds builder of `name`, or UserError saying how to get the data. With an explicit
    `data_dir` nothing is prepared: the data must be there. Without one, tfds' default directory
    is used, and the dataset prepared into it (`prepare`)."""
    builder = tfds_builder(name, data_dir)
    if builder.is_prepared():
        return builder
    if data_dir is not None:
        raise UserError(f"no prepared {name} in --data_dir={data_dir} "
                        f"(expected {builder.data_dir}); {how_to_prepare(name)}")
    return prepare(builder)


def offline_source(name, manual=None):
    """The directory `name` is prepared from without network (Fashion-MNIST's idx files: `manual`,
    else Debian's if installed), or None: it is downloaded. UserError for a `manual` without
    them."""
    if name != fashion_mnist.NAME:
        return None
    if manual is not None:
        if fashion_mnist.missing(manual):
            raise UserError(f"--manual_dir={manual} lacks {', '.join(fashion_mnist.missing(manual))}"
                            f" (Fashion-MNIST's idx files); give the directory that holds all four")
        return manual
    return None if fashion_mnist.missing(fashion_mnist.SOURCE) else fashion_mnist.SOURCE


def prepare(builder, manual=None):
    """Prepares `builder`'s dataset in its data directory: from its offline source if it has one
    (`offline_source`), else downloaded; returns the builder of the prepared dataset."""
    import tensorflow_datasets as tfds
    tfds.disable_progress_bar()  # the line below says what happens; tfds' bars would repeat it
    source = offline_source(builder.name, manual)
    log(f"preparing {builder.name} in {builder.data_dir} from "
        + (f"{source} (no download)" if source else "a download") + " ...")
    if source is None:
        return download_and_prepare(builder)
    root = tfds_dir.data_dir_root(builder)
    before = _paths(root, builder.name)
    with leaves_nothing(root, builder.name), contextlib.redirect_stdout(io.StringIO()):
        fashion_mnist.builder(root, source).download_and_prepare(  # its "Downloading ..." line
            download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    for path in sorted(_paths(root, builder.name) - before, key=len, reverse=True):
        with contextlib.suppress(OSError):  # the empty downloads/ tfds made for nothing
            os.rmdir(path)
    return tfds.builder(builder.name, data_dir=root)


def how_to_prepare(name):
    """The fix a message about data `name` cannot get ends with: how to prepare it elsewhere, and
    the routes that need no internet."""
    if name == fashion_mnist.NAME:
        return (f"install Debian's idx files ({fashion_mnist.INSTALL}) and run "
                f"`{prepare_data_command(name)}`, or give it the four idx files with --manual_dir; "
                f"without them, train on random images with --use_synthetic_data")
    return (f"prepare it on a machine with internet access with `{prepare_data_command(name)}` "
            f"and copy DIR here (or pass its path with --data_dir); without internet, train on "
            f"random images with --use_synthetic_data, or on real ones prepared offline with "
            f"`{prepare_data_command(fashion_mnist.NAME)}` and --dataset={fashion_mnist.NAME}")


def _reason(e):
    """`e` in a few words: requests' "...(host='H', ...): Max retries exceeded with url: U (Caused
    by X(...))" as "ConnectionError: X for HU"; anything else as its type and its text."""
    text = " ".join(str(e).split())
    cause, url = re.search(r"Caused by (\w+)", text), re.search(r"with url: (\S+)", text)
    host = re.search(r"host='([^']+)'", text)
    if cause:
        where = (host.group(1) if host else "") + (url.group(1) if url else "")
        return f"{type(e).__name__}: {cause.group(1)}" + (f" for {where}" if where else "")
    return f"{type(e).__name__}: {text[:160]}" if text else type(e).__name__


def download_and_prepare(builder):
    """Downloads the builder's dataset into its data_dir and prepares it (tfds); returns the
    builder. UserError (one line) if it cannot, with nothing left behind (`leaves_nothing`).

    tfds retries a failed request `MAX_RETRIES` = 10 times with exponential backoff: 204 s before
    any error where the server cannot be reached (measured). With tfds' own setting lowered to
    DOWNLOAD_RETRIES for this call, and its progress bars off, an offline machine gets the one
    UserError line in about a second.
    """
    import tensorflow_datasets as tfds
    # tfds has no public setting of its retries (DownloadConfig has none): its module constant
    from tensorflow_datasets.core.download import downloader
    name, default_retries = builder.name, downloader.MAX_RETRIES
    seconds = download.timeout()  # each network wait (resnet_nobn/data/download.py)
    downloader.MAX_RETRIES = DOWNLOAD_RETRIES
    tfds.disable_progress_bar()
    try:
        with (leaves_nothing(tfds_dir.data_dir_root(builder), name), download.bounded(seconds),
              contextlib.redirect_stdout(io.StringIO())):  # tfds' own lines: ours say it
            builder.download_and_prepare()
    except Exception as e:  # noqa: BLE001 -- any download failure is reported the same way
        raise UserError(f"could not download {name} ({_reason(e)}"
                        f"{download.explain(str(e), seconds)}); {how_to_prepare(name)}") from None
    finally:
        downloader.MAX_RETRIES = default_retries
    return builder


def write_examples(builder, directory, n=10):
    """Writes the first `n` test images of a prepared dataset of pixel arrays as PNG files named
    `<index>_<label>.png` into `directory` (made if missing), each whole, to try run/predict.py
    on; returns their paths. UserError if they cannot be written (the dataset stays prepared)."""
    import tensorflow as tf
    import tensorflow_datasets as tfds
    names = builder.info.features["label"].names
    paths = []
    try:
        os.makedirs(directory, exist_ok=True)
        for i, (image, label) in enumerate(tfds.as_numpy(
                builder.as_dataset(split="test", as_supervised=True).take(n))):
            slug = re.sub(r"[^a-z0-9]+", "-", names[label].lower()).strip("-") or str(label)
            paths.append(os.path.join(directory, f"{i:02d}_{slug}.png"))
            with atomic_file(paths[-1]) as tmp, open(tmp, "wb") as f:
                f.write(tf.io.encode_png(image).numpy())
    except OSError as e:
        where = e.filename or directory
        raise UserError(f"cannot write the test images to --examples_dir={directory}: "
                        f"{e.strerror or e} ({where}); the dataset is prepared: give another "
                        "--examples_dir") from None
    return paths


def _paths(root, name):
    """Every path under `root` that preparing dataset `name` writes to: the dataset's directory
    and tfds' downloads/ (walked whole), and `root` itself."""
    out = {root} if os.path.exists(root) else set()
    for top in (os.path.join(root, name), os.path.join(root, "downloads")):
        for where, dirs, files in os.walk(top):
            out.update(os.path.join(where, f) for f in dirs + files)
        if os.path.exists(top):
            out.add(top)
    return out


@contextlib.contextmanager
def leaves_nothing(root, name):
    """If the block raises (or is interrupted), every path it made where preparing `name` in the
    tfds data directory `root` writes (`_paths`) is removed, newest first: an empty dataset
    directory, a partial download, tfds' empty downloads/ and `root` if it made them."""
    before = _paths(root, name)
    try:
        yield
    except BaseException:
        for path in sorted(_paths(root, name) - before, key=len, reverse=True):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(path)
        raise


# --------------------------------------------------------------------------------------------
# ImageNet


IMAGENET = "imagenet2012"  # tfds' name
ARCHIVES = ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar")


def manual_dir(data_dir):
    """Where tfds looks for the ILSVRC archives: <data_dir>/downloads/manual."""
    return os.path.join(data_root(data_dir), "downloads", "manual")


def data_root(data_dir):
    """The tfds data directory: `data_dir`, or tfds' default (TFDS_DATA_DIR, ~/tensorflow_datasets)."""
    import tensorflow_datasets as tfds
    return data_dir or os.path.expanduser(os.environ.get("TFDS_DATA_DIR") or
                                          tfds.core.constants.DATA_DIR)


def imagenet_builder(data_dir, manual=None):
    """The prepared tfds builder of imagenet2012; prepares it from the manual archives (in `manual`,
    default `manual_dir(data_dir)`) if needed.

    Raises UserError naming the exact paths when the archives are missing (tfds itself raises an
    AssertionError deep inside the builder).
    """
    import tensorflow as tf
    import tensorflow_datasets as tfds
    if data_dir is not None and not os.path.isdir(data_dir):
        raise UserError(f"--data_dir={data_dir} is not a directory; create it with "
                        f"`{prepare_data_command(IMAGENET, data_dir)}` (the ImageNet archives in "
                        f"{manual_dir(data_dir)}) or point it at a tfds data dir")
    builder = tfds.builder(IMAGENET, data_dir=data_dir)
    if builder.is_prepared():
        tfds_dir.check_prepared(builder, IMAGENET, (None, None, 3), DATASETS[IMAGENET].num_classes,
                                ("train", "validation"))
        return builder
    command = prepare_data_command(IMAGENET, data_root(data_dir)) + (f" --manual_dir={manual}"
                                                                     if manual else "")
    manual = manual or manual_dir(data_dir)
    missing = [a for a in ARCHIVES if not os.path.isfile(os.path.join(manual, a))]
    if missing:
        raise UserError(
            f"{IMAGENET} is not prepared in {builder.data_dir} and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing: download ILSVRC2012_img_train.tar "
            f"and ILSVRC2012_img_val.tar from https://image-net.org (registration needed), put "
            f"both in {manual}/ and run `{command}` once (or re-run this command)")
    for archive in ARCHIVES:
        check_archive(os.path.join(manual, archive))
    try:
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=manual))
    except AssertionError as e:  # tfds' own manual-dir check
        raise UserError(f"cannot prepare {IMAGENET} from {manual}: {first_line(e)}") from None
    except (tarfile.TarError, EOFError, tf.errors.OpError) as e:  # damaged inside
        raise UserError(f"cannot prepare {IMAGENET} from {manual}: an archive is damaged "
                        f"({type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}); "
                        f"download {' and '.join(ARCHIVES)} again") from None
    return builder


def check_archive(path):
    """UserError naming `path` unless it is a tar file with at least one member, of whole 512-byte
    blocks (only its first header is read)."""
    try:
        with tarfile.open(path, "r|*") as tar:
            first = tar.next()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UserError(f"{path} is not a tar file ({e}); download it again from "
                        "https://image-net.org") from None
    if first is None:
        raise UserError(f"{path} is an empty tar file; download it again from "
                        "https://image-net.org")
    size = os.path.getsize(path)
    if size % 512:
        raise UserError(f"{path} is truncated (a tar file is whole 512-byte blocks, it has "
                        f"{size:,} bytes); download it again from https://image-net.org")
