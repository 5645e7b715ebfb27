"""Running student code: the sandbox launcher, runners and sessions (host side).

``guest/`` is all that is mounted inside.
"""
