"""Shared test setup: quiet TensorFlow, two logical CPU devices for MirroredStrategy tests."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
