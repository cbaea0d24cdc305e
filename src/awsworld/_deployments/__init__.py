"""Runs pinned to the deployment that started them (docs/how-to/changing-code.md, "Runs stay
on the code that started them").

A *deployment* is one version of the code that consumes a World's queue: a published version of the Lambda flow
function (``v7``), a snapshot of the modules ``awsworld dev`` loaded (``dev-1a2b3c4d``), a version a test
environment was given (``WorkflowTestEnv.deploy``). Each run records the deployment its first delivery ran on
(``pins``), and every later delivery of it runs that deployment's code: a delivery that reaches another deployment
is handed to the run's (``routing``; ``host``'s ``hand_over``, several deployments in one process: ``local_host``),
at most ``MAX_REROUTES`` times, and a run whose deployment is gone fails with ``DeploymentMismatchError``. A
deployment's id and code digest are ``identity``'s. The registry of deployments (``model``) lists them, with what
they hold, for ``awsworld deployments``; an upgrade moves runs on purpose, after a replay (``upgrade``).
"""
