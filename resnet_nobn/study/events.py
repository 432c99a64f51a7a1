"""A run's TensorBoard scalars read without TensorFlow, for the report's block-norm panels: the
TFRecord framing of an events file (length, its CRC, the record, its CRC) and its Event protocol
buffers (tensorboard's own event_pb2, which loads no TensorFlow).

A scalar of tf.summary.scalar is a one-element tensor (float_val or tensor_content); one of the
older API a simple_value. A file still being written ends at its last whole record.
"""
import glob
import os
import struct

import numpy as np

_DTYPES = {1: "<f4", 2: "<f8"}  # TensorFlow's DT_FLOAT, DT_DOUBLE


def scalars(directory, prefix=""):
    """{tag: {step: value}} of the scalars whose tag starts with `prefix` in the events files of
    `directory` (a later value at a step replaces an earlier one); {} if there are none."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2
    out = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "events.out.tfevents.*"))):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            end = pos + 12 + length + 4
            if end > len(data):
                break
            event = event_pb2.Event()
            try:
                event.ParseFromString(data[pos + 12:pos + 12 + length])
            except DecodeError:
                break
            pos = end
            for v in event.summary.value:
                value = _value(v) if v.tag.startswith(prefix) else None
                if value is not None:
                    out.setdefault(v.tag, {})[int(event.step)] = value
    return out


def _value(v):
    """The number in a Summary.Value, or None."""
    if v.HasField("simple_value"):
        return float(v.simple_value)
    t = v.tensor
    if t.float_val or t.double_val:
        return float((t.float_val or t.double_val)[0])
    if t.tensor_content and t.dtype in _DTYPES:
        return float(np.frombuffer(t.tensor_content, _DTYPES[t.dtype])[0])
    return None


def largest(directory, prefix):
    """[(step, the largest value of the tags under `prefix` at that step)], sorted by step."""
    by_step = {}
    for values in scalars(directory, prefix).values():
        for step, value in values.items():
            by_step[step] = max(by_step.get(step, value), value)
    return sorted(by_step.items())
