"""awsworld: durable Python workflows on AWS serverless."""

__version__ = "0.1.0"
