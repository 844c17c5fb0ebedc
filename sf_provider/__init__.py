"""sf-provider: Claude, through the Claude Agent SDK and its bundled Claude Code CLI, as a drop-in
model provider that really calls your application's function tools.

Start with `ClaudeAgentProvider` and `FunctionTool`; test offline with `sf_provider.testing`.
"""

from .capabilities import (
    AuthStatus,
    CapabilityReport,
    CLIStatus,
    ToolCapability,
    check_capabilities,
    ensure_capabilities,
    find_cli,
)
from .errors import (
    APIError,
    AuthenticationError,
    CLINotFoundError,
    DuplicateToolNameError,
    EmptyToolRoutingError,
    InvalidMessagesError,
    InvalidToolNameError,
    InvalidToolSchemaError,
    MaxTurnsError,
    MissingExecutorError,
    OverloadedError,
    ProcessDiedError,
    ProviderCompatibilityError,
    ProviderError,
    RateLimitError,
    ToolChoiceViolationError,
    ToolDefinitionError,
    ToolRoutingError,
    UnsupportedRequestError,
)
from .gates import CallContext, Gate, GateDecision, GateRequest, Transport
from .provider import CallOptions, ClaudeAgentProvider, NamedToolChoice, ToolChoice
from .registry import GUIDANCE_TOOL_NAME, ToolRegistry, group_env_var
from .settings import ProviderSettings
from .tools import Executor, FunctionTool, ToolOutput, normalize_input_schema
from .types import (
    CallWarning,
    ErrorPart,
    FinishPart,
    FinishReason,
    GenerateResult,
    Mode,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningStartPart,
    StreamPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolCallRecord,
    ToolInputDeltaPart,
    ToolInputEndPart,
    ToolInputStartPart,
    ToolResultPart,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "GUIDANCE_TOOL_NAME",
    "APIError",
    "AuthStatus",
    "AuthenticationError",
    "CLINotFoundError",
    "CLIStatus",
    "CallContext",
    "CallOptions",
    "CallWarning",
    "CapabilityReport",
    "ClaudeAgentProvider",
    "DuplicateToolNameError",
    "EmptyToolRoutingError",
    "ErrorPart",
    "Executor",
    "FinishPart",
    "FinishReason",
    "FunctionTool",
    "Gate",
    "GateDecision",
    "GateRequest",
    "GenerateResult",
    "InvalidMessagesError",
    "InvalidToolNameError",
    "InvalidToolSchemaError",
    "MaxTurnsError",
    "MissingExecutorError",
    "Mode",
    "NamedToolChoice",
    "OverloadedError",
    "ProcessDiedError",
    "ProviderCompatibilityError",
    "ProviderError",
    "ProviderSettings",
    "RateLimitError",
    "ReasoningDeltaPart",
    "ReasoningEndPart",
    "ReasoningStartPart",
    "StreamPart",
    "StreamStartPart",
    "TextDeltaPart",
    "TextEndPart",
    "TextStartPart",
    "ToolCallPart",
    "ToolCallRecord",
    "ToolCapability",
    "ToolChoice",
    "ToolChoiceViolationError",
    "ToolDefinitionError",
    "ToolInputDeltaPart",
    "ToolInputEndPart",
    "ToolInputStartPart",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultPart",
    "ToolRoutingError",
    "Transport",
    "UnsupportedRequestError",
    "Usage",
    "__version__",
    "check_capabilities",
    "ensure_capabilities",
    "find_cli",
    "group_env_var",
    "normalize_input_schema",
]

import logging as _logging

# A library logs; the application decides where records go.
_logging.getLogger("sf_provider").addHandler(_logging.NullHandler())
