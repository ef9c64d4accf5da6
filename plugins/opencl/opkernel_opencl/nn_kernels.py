"""placeholder"""


def register_all() -> None:
    pass
