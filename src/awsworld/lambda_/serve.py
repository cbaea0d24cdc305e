"""The old path of ``awsworld.lambda_host.serve``, which handler files written before the rename import."""

from awsworld.lambda_host.serve import handler  # names: keep

__all__ = ["handler"]
