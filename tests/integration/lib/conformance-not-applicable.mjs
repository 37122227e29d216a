// What of the pinned conformance suite (@modelcontextprotocol/conformance
// 0.2.0-alpha.12, `--requirements REVISION`) does not apply to this server,
// one reason each. conformance.test.mjs runs each requirement set whole and
// fails when a scenario or check that is not listed here fails.
//
// Most scenarios exercise the reference server's fixtures: tools named
// test_* (and json_schema_2020_12_tool, slow_compute, greet, ...), prompts and
// test:// resources. This server has its own tools and no such fixtures.

const fixtureTool = (name) => `calls the reference server's fixture tool ${name}; this server has only its own tools`;
const fixturePrompt = 'gets a reference fixture prompt (prompts/get); this server has no prompts';
const fixtureResource = (uri) => `reads the reference fixture resource ${uri}; this server has only sandbox files`;
const mrtr = (name) =>
  `calls the reference fixture tool ${name}, which answers with an InputRequiredResult; no tool of this server asks the client for input`;
const tasks = 'the tasks extension (io.modelcontextprotocol/tasks, not scored by the requirement set) is a later issue';

const common = {
  'completion-complete': 'completes an argument of the reference prompt test_prompt_with_arguments; this server has no prompts and no completions',
  'tools-call-simple-text': fixtureTool('test_simple_text'),
  'tools-call-image': fixtureTool('test_image_content'),
  'tools-call-audio': fixtureTool('test_audio_content'),
  'tools-call-embedded-resource': fixtureTool('test_embedded_resource'),
  'tools-call-mixed-content': fixtureTool('test_multiple_content_types'),
  'tools-call-error': fixtureTool('test_error_handling'),
  'tools-call-with-progress': fixtureTool('test_tool_with_progress'),
  'resources-read-text': fixtureResource('test://static-text'),
  'resources-read-binary': fixtureResource('test://static-binary'),
  'resources-templates-read': fixtureResource('test://template/{id}/data'),
  'prompts-get-simple': fixturePrompt,
  'prompts-get-with-args': fixturePrompt,
  'prompts-get-embedded-resource': fixturePrompt,
  'prompts-get-with-image': fixturePrompt,
  'json-schema-2020-12': fixtureTool('json_schema_2020_12_tool') + ' (pending in the suite, not scored)',
};

export const NOT_APPLICABLE = {
  '2026-07-28': {
    ...common,
    'input-required-result-basic-elicitation': mrtr('test_input_required_result_elicitation'),
    'input-required-result-basic-sampling': mrtr('test_input_required_result_sampling'),
    'input-required-result-basic-list-roots': mrtr('test_input_required_result_list_roots'),
    'input-required-result-request-state': mrtr('test_input_required_result_request_state'),
    'input-required-result-multiple-input-requests': mrtr('test_input_required_result_multiple_inputs'),
    'input-required-result-multi-round': mrtr('test_input_required_result_multi_round'),
    'input-required-result-non-tool-request': 'gets a reference fixture prompt that answers with an InputRequiredResult; this server has no prompts',
    'input-required-result-result-type': mrtr('test_input_required_result_elicitation'),
    'input-required-result-tampered-state': mrtr('test_input_required_result_request_state'),
    'input-required-result-capability-check': mrtr('test_input_required_result_capabilities'),
    // These three send inputResponses to the same fixture tool: the error for
    // an unknown tool satisfies ("validates") or fails ("re-requests") their
    // checks without any of them applying.
    'input-required-result-missing-input-response': mrtr('test_input_required_result_elicitation'),
    'input-required-result-ignore-extra-params': mrtr('test_input_required_result_elicitation'),
    'input-required-result-validate-input': mrtr('test_input_required_result_elicitation'),
    'tasks-lifecycle': tasks,
    'tasks-capability-negotiation': tasks,
    'tasks-wire-fields': tasks,
    'tasks-request-state-removal': tasks,
    'tasks-mrtr-input': tasks,
    'tasks-request-headers': tasks,
    'tasks-dispatch-and-envelope': tasks,
    'tasks-status-notifications': tasks,
    'tasks-required-task-error': tasks,
    'tasks-mrtr-composition': tasks,
  },
  '2025-11-25': {
    ...common,
    'tools-call-with-logging': fixtureTool('test_tool_with_logging'),
    'tools-call-sampling': fixtureTool('test_sampling'),
    'tools-call-elicitation': fixtureTool('test_elicitation'),
    'elicitation-sep1034-defaults': fixtureTool('test_elicitation_sep1034_defaults'),
    'elicitation-sep1330-enums': fixtureTool('test_elicitation_sep1330_enums'),
    'resources-subscribe': 'subscribes to test://watched-resource; this server declares subscribe: false (outputs change only through calls)',
    'resources-unsubscribe': 'unsubscribes from test://watched-resource; this server declares subscribe: false',
    'server-sse-polling':
      fixtureTool('test_reconnection') + ' (SEP-1699 polling: a tool that closes its stream mid-call; this server ends a stream only with its response)',
  },
};

// Checks of applicable scenarios that the suite itself reports as "Not
// testable" without its fixtures (a FAILURE whose message starts so).
export const NOT_TESTABLE_CHECKS = {
  'sep-2575-server-rejects-undeclared-capability':
    'needs the fixture tool test_missing_capability (a tool that requires sampling); no tool of this server needs a client capability',
  'sep-2575-missing-capability-http-400': 'the same fixture tool test_missing_capability',
  'sep-2575-http-server-no-independent-requests-on-stream':
    'needs the fixture tool test_streaming_elicitation; this server never sends a request on a stream (tests/unit/test-mcp-modern.c reads its streams)',
  'sep-2575-server-no-log-without-loglevel':
    'needs the fixture tool test_logging_tool; tests/unit/test-mcp-modern.c checks that a call without logLevel gets no notifications/message',
};

// Scenarios each requirement set must run and pass here.
export const MUST_PASS = {
  '2026-07-28': [
    'server-stateless',
    'tools-list',
    'caching',
    'http-header-validation',
    'http-custom-header-server-validation',
    'dns-rebinding-protection',
    'sep-2164-resource-not-found',
    'server-sse-multiple-streams',
    'resources-list',
    'prompts-list',
    'input-required-result-unsupported-methods',
  ],
  '2025-11-25': [
    'server-initialize',
    'logging-set-level',
    'ping',
    'tools-list',
    'server-sse-multiple-streams',
    'resources-list',
    'dns-rebinding-protection',
    'server-session-lifecycle',
    'prompts-list',
  ],
};
