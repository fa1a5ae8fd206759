from sparsile._native import *  # noqa
