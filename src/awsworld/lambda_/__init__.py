"""The old path of the Lambda host (``awsworld.lambda_host``), kept for the handler files ``awsworld init``
wrote into projects before the rename (``from awsworld.lambda_.flow import handler``)."""
