"""Errors a user can fix. The CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """Bad input or environment: the message names the bad thing and how to fix it."""
