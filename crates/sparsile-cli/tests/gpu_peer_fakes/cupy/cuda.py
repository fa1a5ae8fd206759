"""cupy.cuda of the stand-in: devices, events, the runtime's device count."""

import fake_clock


class CUDARuntimeError(RuntimeError):
    pass


class runtime:
    @staticmethod
    def getDeviceCount():
        if fake_clock.devices() == 0:
            raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return fake_clock.devices()


class Device:
    def __init__(self, index=None):
        self.index = index

    def __enter__(self):
        assert self.index is None or self.index < fake_clock.devices()
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


class Event:
    def __init__(self):
        self.at = None

    def record(self):
        self.at = fake_clock.now()

    def synchronize(self):
        assert self.at is not None, "synchronize on an event never recorded"


def get_elapsed_time(start, end):
    assert start.at is not None and end.at is not None
    return end.at - start.at


class device:
    @staticmethod
    def get_cusparse_handle():
        return 1
