"""Text helpers: describe() is reached only by a gate that checks nothing."""


def describe(x):
    label = "value"
    return f"{label}={x}"


def shout(s):
    result = s.upper()
    return result


def whisper(s):
    result = s.lower()
    return result
