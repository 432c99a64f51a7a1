"""A tfds data directory prepared: CIFAR downloaded (in a bounded time,
resnet_nobn/data/download.py) and ImageNet built from the ILSVRC archives, by the tfds builders' own
`download_and_prepare`; a directory prepared already is checked (resnet_nobn/data/tfds_dir.py). The
training inputs (cifar.py, imagenet.py) and run/prepare_data.py get their builders here.
"""
import os
import re
import tarfile

import tensorflow as tf

from resnet_nobn.config import DATASETS
from resnet_nobn.data import download, tfds_dir
from resnet_nobn.errors import UserError, first_line, prepare_data_command

# --------------------------------------------------------------------------------------------
# CIFAR


DOWNLOAD_RETRIES = 3  # tfds' retries of a failed download request (its default 10: 204 s offline)


def cifar_builder(name, data_dir):
    """Returns a prepared tfds builder, or raises UserError saying how to get the data.

    With an explicit `data_dir` nothing is downloaded: the data must already be there. Without
    one, tfds' default directory is used and tfds may download (CIFAR) into it.
    """
    builder = tfds_builder(name, data_dir)
    if builder.is_prepared():
        return builder
    if data_dir is not None:
        raise UserError(f"no prepared {name} in --data_dir={data_dir} "
                        f"(expected {builder.data_dir}); {_how_to_prepare(name)}")
    return download_and_prepare(builder)


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


def _how_to_prepare(name):
    return (f"prepare it on a machine with internet access with `{prepare_data_command(name)}` "
            f"and copy DIR here (or pass its path with --data_dir)")


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
    """Downloads CIFAR into the builder's data_dir and prepares it (tfds); returns the builder.

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
        with download.bounded(seconds):
            builder.download_and_prepare()
    except Exception as e:  # noqa: BLE001 -- any download failure is reported the same way
        raise UserError(f"could not download {name} ({_reason(e)}"
                        f"{download.explain(str(e), seconds)}); {_how_to_prepare(name)}") from None
    finally:
        downloader.MAX_RETRIES = default_retries
    return builder


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
    import tensorflow_datasets as tfds
    if data_dir is not None and not os.path.isdir(data_dir):
        raise UserError(f"--data_dir={data_dir} does not exist")
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
