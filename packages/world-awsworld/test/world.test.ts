// The Workflow SDK's own World test suite, against this package: each test starts the suite's app with
// WORKFLOW_TARGET_WORLD=./dist/index.js, which forwards every World call to `awsworld serve` (WORLD_SERVER_URL).
import { createTestSuite } from '@workflow/world-testing';

createTestSuite('./dist/index.js');
