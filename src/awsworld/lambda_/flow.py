"""The old path of ``awsworld.lambda_host.flow``, which handler files written before the rename import."""

from awsworld.lambda_host.flow import handler  # names: keep

__all__ = ["handler"]
