"""The workflow names a deployment publishes, so a start can refuse a name no consumer of its queue registers.

See ``model`` for what is published, when, and the rule that decides whether a name is certainly unknown.
"""
