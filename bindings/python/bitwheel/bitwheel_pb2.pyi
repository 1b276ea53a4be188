from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ACK_TIMEOUT: TakeBack
ALREADY_HELLO: ErrorCode
BAD_CALENDAR: ErrorCode
BAD_DEADLINE: ErrorCode
BAD_FRAME: ErrorCode
BAD_REQUEST: ErrorCode
BAD_VERSION: ErrorCode
CLOCK_BOOTTIME: Clock
CLOCK_MONOTONIC: Clock
CONSUMER: Role
DESCRIPTOR: _descriptor.FileDescriptor
DISCONNECTED: TakeBack
DUPLICATE_KEY: ErrorCode
ERROR_CODE_UNSPECIFIED: ErrorCode
FRAME_TOO_LARGE: ErrorCode
HELLO_REQUIRED: ErrorCode
HOLD_LIMIT: ErrorCode
INTERNAL: ErrorCode
LANE_ONESHOT: Lane
LANE_PERIODIC: Lane
LANE_UNSPECIFIED: Lane
NO_MEMORY: ErrorCode
OVER_BUDGET: ErrorCode
PAYLOAD_TOO_LARGE: ErrorCode
PERMISSION_DENIED: ErrorCode
PRODUCER: Role
PROTOCOL_VERSION: ProtocolVersion
RELEASED: TakeBack
RESTARTED: TakeBack
ROLE_UNSPECIFIED: Role
SESSION_BUSY: ErrorCode
SHUTTING_DOWN: ErrorCode
STORAGE_UNAVAILABLE: ErrorCode
TAKE_BACK_UNSPECIFIED: TakeBack
TOO_MANY_CLIENTS: ErrorCode
TOO_MANY_TIMERS: ErrorCode
UNKNOWN_MESSAGE: ErrorCode
UNKNOWN_SESSION: ErrorCode

class Ack(_message.Message):
    __slots__ = ["cumulative", "delivery"]
    CUMULATIVE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    cumulative: bool
    delivery: int
    def __init__(self, delivery: _Optional[int] = ..., cumulative: bool = ...) -> None: ...

class AckReply(_message.Message):
    __slots__ = ["acked"]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    acked: int
    def __init__(self, acked: _Optional[int] = ...) -> None: ...

class Calendar(_message.Message):
    __slots__ = ["base_realtime_ns", "iterations", "spec"]
    BASE_REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    base_realtime_ns: int
    iterations: int
    spec: str
    def __init__(self, spec: _Optional[str] = ..., iterations: _Optional[int] = ..., base_realtime_ns: _Optional[int] = ...) -> None: ...

class CalendarReply(_message.Message):
    __slots__ = ["base_realtime_ns", "elapses_realtime_ns", "gave_up", "normalized", "zone"]
    BASE_REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    ELAPSES_REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    GAVE_UP_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    base_realtime_ns: int
    elapses_realtime_ns: _containers.RepeatedScalarFieldContainer[int]
    gave_up: bool
    normalized: str
    zone: str
    def __init__(self, normalized: _Optional[str] = ..., elapses_realtime_ns: _Optional[_Iterable[int]] = ..., zone: _Optional[str] = ..., base_realtime_ns: _Optional[int] = ..., gave_up: bool = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ["key"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: int
    def __init__(self, key: _Optional[int] = ...) -> None: ...

class CancelReply(_message.Message):
    __slots__ = ["pending"]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    pending: bool
    def __init__(self, pending: bool = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ["dead_lettered_ns", "deliveries", "first_handed_ns", "last_handed_ns", "reason", "session"]
    DEAD_LETTERED_NS_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    FIRST_HANDED_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_HANDED_NS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    dead_lettered_ns: int
    deliveries: int
    first_handed_ns: int
    last_handed_ns: int
    reason: TakeBack
    session: bytes
    def __init__(self, session: _Optional[bytes] = ..., deliveries: _Optional[int] = ..., first_handed_ns: _Optional[int] = ..., last_handed_ns: _Optional[int] = ..., dead_lettered_ns: _Optional[int] = ..., reason: _Optional[_Union[TakeBack, str]] = ...) -> None: ...

class Envelope(_message.Message):
    __slots__ = ["ack", "ack_reply", "calendar", "calendar_reply", "cancel", "cancel_reply", "error", "fired", "hello", "hello_reply", "kick", "kick_reply", "list_sessions", "list_sessions_reply", "list_timers", "list_timers_reply", "release", "release_reply", "request_id", "schedule", "schedule_reply", "set_policy", "set_policy_reply", "stats", "stats_reply", "touch", "touch_reply"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    ACK_REPLY_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_REPLY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REPLY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HELLO_REPLY_FIELD_NUMBER: _ClassVar[int]
    KICK_FIELD_NUMBER: _ClassVar[int]
    KICK_REPLY_FIELD_NUMBER: _ClassVar[int]
    LIST_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    LIST_SESSIONS_REPLY_FIELD_NUMBER: _ClassVar[int]
    LIST_TIMERS_FIELD_NUMBER: _ClassVar[int]
    LIST_TIMERS_REPLY_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_REPLY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_REPLY_FIELD_NUMBER: _ClassVar[int]
    SET_POLICY_FIELD_NUMBER: _ClassVar[int]
    SET_POLICY_REPLY_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    STATS_REPLY_FIELD_NUMBER: _ClassVar[int]
    TOUCH_FIELD_NUMBER: _ClassVar[int]
    TOUCH_REPLY_FIELD_NUMBER: _ClassVar[int]
    ack: Ack
    ack_reply: AckReply
    calendar: Calendar
    calendar_reply: CalendarReply
    cancel: Cancel
    cancel_reply: CancelReply
    error: Error
    fired: Fired
    hello: Hello
    hello_reply: HelloReply
    kick: Kick
    kick_reply: KickReply
    list_sessions: ListSessions
    list_sessions_reply: ListSessionsReply
    list_timers: ListTimers
    list_timers_reply: ListTimersReply
    release: Release
    release_reply: ReleaseReply
    request_id: int
    schedule: Schedule
    schedule_reply: ScheduleReply
    set_policy: SetPolicy
    set_policy_reply: SetPolicyReply
    stats: Stats
    stats_reply: StatsReply
    touch: Touch
    touch_reply: TouchReply
    def __init__(self, request_id: _Optional[int] = ..., hello: _Optional[_Union[Hello, _Mapping]] = ..., schedule: _Optional[_Union[Schedule, _Mapping]] = ..., cancel: _Optional[_Union[Cancel, _Mapping]] = ..., stats: _Optional[_Union[Stats, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., release: _Optional[_Union[Release, _Mapping]] = ..., touch: _Optional[_Union[Touch, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., hello_reply: _Optional[_Union[HelloReply, _Mapping]] = ..., schedule_reply: _Optional[_Union[ScheduleReply, _Mapping]] = ..., cancel_reply: _Optional[_Union[CancelReply, _Mapping]] = ..., stats_reply: _Optional[_Union[StatsReply, _Mapping]] = ..., ack_reply: _Optional[_Union[AckReply, _Mapping]] = ..., fired: _Optional[_Union[Fired, _Mapping]] = ..., list_sessions: _Optional[_Union[ListSessions, _Mapping]] = ..., list_timers: _Optional[_Union[ListTimers, _Mapping]] = ..., list_sessions_reply: _Optional[_Union[ListSessionsReply, _Mapping]] = ..., list_timers_reply: _Optional[_Union[ListTimersReply, _Mapping]] = ..., set_policy: _Optional[_Union[SetPolicy, _Mapping]] = ..., kick: _Optional[_Union[Kick, _Mapping]] = ..., release_reply: _Optional[_Union[ReleaseReply, _Mapping]] = ..., touch_reply: _Optional[_Union[TouchReply, _Mapping]] = ..., set_policy_reply: _Optional[_Union[SetPolicyReply, _Mapping]] = ..., kick_reply: _Optional[_Union[KickReply, _Mapping]] = ..., calendar: _Optional[_Union[Calendar, _Mapping]] = ..., calendar_reply: _Optional[_Union[CalendarReply, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ["code", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    message: str
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., message: _Optional[str] = ...) -> None: ...

class Fired(_message.Message):
    __slots__ = ["dead_letter", "deadline_ns", "deliveries", "delivery", "due_realtime_ns", "fire_count", "fired_at_ns", "key", "late", "payload", "redelivered"]
    DEADLINE_NS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    DUE_REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    FIRED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    FIRE_COUNT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    REDELIVERED_FIELD_NUMBER: _ClassVar[int]
    dead_letter: DeadLetter
    deadline_ns: int
    deliveries: int
    delivery: int
    due_realtime_ns: int
    fire_count: int
    fired_at_ns: int
    key: int
    late: bool
    payload: bytes
    redelivered: bool
    def __init__(self, key: _Optional[int] = ..., payload: _Optional[bytes] = ..., deadline_ns: _Optional[int] = ..., fired_at_ns: _Optional[int] = ..., fire_count: _Optional[int] = ..., late: bool = ..., redelivered: bool = ..., delivery: _Optional[int] = ..., deliveries: _Optional[int] = ..., dead_letter: _Optional[_Union[DeadLetter, _Mapping]] = ..., due_realtime_ns: _Optional[int] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["ack_timeout_ns", "auto_ack", "coalesce", "owner_uid", "protocol_version", "role", "session", "window"]
    ACK_TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    AUTO_ACK_FIELD_NUMBER: _ClassVar[int]
    COALESCE_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    ack_timeout_ns: int
    auto_ack: bool
    coalesce: bool
    owner_uid: int
    protocol_version: int
    role: Role
    session: bytes
    window: int
    def __init__(self, protocol_version: _Optional[int] = ..., session: _Optional[bytes] = ..., role: _Optional[_Union[Role, str]] = ..., window: _Optional[int] = ..., ack_timeout_ns: _Optional[int] = ..., auto_ack: bool = ..., owner_uid: _Optional[int] = ..., coalesce: bool = ...) -> None: ...

class HelloReply(_message.Message):
    __slots__ = ["ack_timeout_ns", "auto_ack", "coalesce", "consumers", "daemon_version", "dropped", "lanes", "limits", "oneshot_resolution_ns", "owner_uid", "periodic_resolution_ns", "policy", "protocol_version", "queued", "resumed", "role", "timers", "window"]
    ACK_TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    AUTO_ACK_FIELD_NUMBER: _ClassVar[int]
    COALESCE_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    DAEMON_VERSION_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    LANES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    ONESHOT_RESOLUTION_NS_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_RESOLUTION_NS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TIMERS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    ack_timeout_ns: int
    auto_ack: bool
    coalesce: bool
    consumers: int
    daemon_version: str
    dropped: int
    lanes: _containers.RepeatedCompositeFieldContainer[LaneInfo]
    limits: Limits
    oneshot_resolution_ns: int
    owner_uid: int
    periodic_resolution_ns: int
    policy: Policy
    protocol_version: int
    queued: int
    resumed: bool
    role: Role
    timers: int
    window: int
    def __init__(self, protocol_version: _Optional[int] = ..., daemon_version: _Optional[str] = ..., oneshot_resolution_ns: _Optional[int] = ..., periodic_resolution_ns: _Optional[int] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., resumed: bool = ..., timers: _Optional[int] = ..., queued: _Optional[int] = ..., dropped: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., window: _Optional[int] = ..., ack_timeout_ns: _Optional[int] = ..., auto_ack: bool = ..., consumers: _Optional[int] = ..., owner_uid: _Optional[int] = ..., lanes: _Optional[_Iterable[_Union[LaneInfo, _Mapping]]] = ..., coalesce: bool = ..., policy: _Optional[_Union[Policy, _Mapping]] = ...) -> None: ...

class Kick(_message.Message):
    __slots__ = ["key", "limit"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    key: int
    limit: int
    def __init__(self, key: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class KickReply(_message.Message):
    __slots__ = ["kicked", "more"]
    KICKED_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    kicked: int
    more: bool
    def __init__(self, kicked: _Optional[int] = ..., more: bool = ...) -> None: ...

class LaneInfo(_message.Message):
    __slots__ = ["max_late_ns", "resolution_ns"]
    MAX_LATE_NS_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_NS_FIELD_NUMBER: _ClassVar[int]
    max_late_ns: int
    resolution_ns: int
    def __init__(self, resolution_ns: _Optional[int] = ..., max_late_ns: _Optional[int] = ...) -> None: ...

class LaneStats(_message.Message):
    __slots__ = ["cancelled", "fired", "inserted", "lost", "overflow", "pending"]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    INSERTED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    OVERFLOW_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    cancelled: int
    fired: int
    inserted: int
    lost: int
    overflow: int
    pending: int
    def __init__(self, pending: _Optional[int] = ..., overflow: _Optional[int] = ..., inserted: _Optional[int] = ..., cancelled: _Optional[int] = ..., fired: _Optional[int] = ..., lost: _Optional[int] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ["default_max_deliveries", "hello_timeout_ns", "max_bytes_per_uid", "max_clients", "max_clients_per_uid", "max_frame_bytes", "max_hold_ns", "max_journal_bytes_per_uid", "max_kick", "max_memory_bytes", "max_output_bytes", "max_payload_bytes", "max_periodic_rate_per_uid", "max_queued", "max_release_delay_ns", "max_sessions_per_uid", "max_timers", "max_timers_per_uid", "max_window", "session_linger_ns"]
    DEFAULT_MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    HELLO_TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_PER_UID_FIELD_NUMBER: _ClassVar[int]
    MAX_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_CLIENTS_PER_UID_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_NS_FIELD_NUMBER: _ClassVar[int]
    MAX_JOURNAL_BYTES_PER_UID_FIELD_NUMBER: _ClassVar[int]
    MAX_KICK_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PERIODIC_RATE_PER_UID_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUED_FIELD_NUMBER: _ClassVar[int]
    MAX_RELEASE_DELAY_NS_FIELD_NUMBER: _ClassVar[int]
    MAX_SESSIONS_PER_UID_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMERS_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMERS_PER_UID_FIELD_NUMBER: _ClassVar[int]
    MAX_WINDOW_FIELD_NUMBER: _ClassVar[int]
    SESSION_LINGER_NS_FIELD_NUMBER: _ClassVar[int]
    default_max_deliveries: int
    hello_timeout_ns: int
    max_bytes_per_uid: int
    max_clients: int
    max_clients_per_uid: int
    max_frame_bytes: int
    max_hold_ns: int
    max_journal_bytes_per_uid: int
    max_kick: int
    max_memory_bytes: int
    max_output_bytes: int
    max_payload_bytes: int
    max_periodic_rate_per_uid: int
    max_queued: int
    max_release_delay_ns: int
    max_sessions_per_uid: int
    max_timers: int
    max_timers_per_uid: int
    max_window: int
    session_linger_ns: int
    def __init__(self, max_frame_bytes: _Optional[int] = ..., max_payload_bytes: _Optional[int] = ..., max_timers: _Optional[int] = ..., max_queued: _Optional[int] = ..., session_linger_ns: _Optional[int] = ..., max_output_bytes: _Optional[int] = ..., max_clients: _Optional[int] = ..., max_window: _Optional[int] = ..., max_clients_per_uid: _Optional[int] = ..., max_sessions_per_uid: _Optional[int] = ..., max_timers_per_uid: _Optional[int] = ..., max_periodic_rate_per_uid: _Optional[int] = ..., max_bytes_per_uid: _Optional[int] = ..., max_memory_bytes: _Optional[int] = ..., max_journal_bytes_per_uid: _Optional[int] = ..., hello_timeout_ns: _Optional[int] = ..., max_release_delay_ns: _Optional[int] = ..., max_hold_ns: _Optional[int] = ..., default_max_deliveries: _Optional[int] = ..., max_kick: _Optional[int] = ...) -> None: ...

class ListSessions(_message.Message):
    __slots__ = ["cursor", "limit", "owner_uid"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    limit: int
    owner_uid: int
    def __init__(self, owner_uid: _Optional[int] = ..., limit: _Optional[int] = ..., cursor: _Optional[int] = ...) -> None: ...

class ListSessionsReply(_message.Message):
    __slots__ = ["cursor", "more", "sessions"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    more: bool
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., more: bool = ..., cursor: _Optional[int] = ...) -> None: ...

class ListTimers(_message.Message):
    __slots__ = ["cursor", "limit", "owner_uid", "session"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    limit: int
    owner_uid: int
    session: bytes
    def __init__(self, session: _Optional[bytes] = ..., owner_uid: _Optional[int] = ..., limit: _Optional[int] = ..., cursor: _Optional[int] = ...) -> None: ...

class ListTimersReply(_message.Message):
    __slots__ = ["cursor", "more", "now_ns", "owner_uid", "realtime_ns", "timers", "total"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    NOW_NS_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    TIMERS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    more: bool
    now_ns: int
    owner_uid: int
    realtime_ns: int
    timers: _containers.RepeatedCompositeFieldContainer[TimerInfo]
    total: int
    def __init__(self, timers: _Optional[_Iterable[_Union[TimerInfo, _Mapping]]] = ..., more: bool = ..., cursor: _Optional[int] = ..., total: _Optional[int] = ..., owner_uid: _Optional[int] = ..., now_ns: _Optional[int] = ..., realtime_ns: _Optional[int] = ...) -> None: ...

class Metrics(_message.Message):
    __slots__ = ["accepted", "ack_latency_bucket", "ack_latency_sum_ns", "dead_lettered", "deliveries_bucket", "deliveries_le", "disconnects_closed", "disconnects_error", "disconnects_no_memory", "errors", "fire_writes", "fires_coalesced", "fires_delivered", "journal_records", "journal_sync_bucket", "journal_sync_le_ns", "journal_sync_ns_last", "journal_sync_ns_max", "journal_sync_ns_total", "journal_sync_records_bucket", "journal_sync_records_le", "journal_syncs", "kicked", "lateness_bucket", "lateness_le_ns", "lateness_sum_ns", "periodic_lateness_bucket", "periodic_lateness_sum_ns", "periodic_queue_wait_bucket", "periodic_queue_wait_sum_ns", "process_cpu_ns", "process_max_fds", "process_open_fds", "process_resident_bytes", "process_start_time_ns", "process_virtual_bytes", "queue_wait_bucket", "queue_wait_sum_ns", "refused_max_clients", "refused_memory", "refused_uid_budget", "released", "requests", "slow_consumer_disconnects", "snapshot_age_ns", "snapshot_ns_last", "snapshot_ns_total", "snapshots", "storage", "storage_down", "touched"]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ACK_LATENCY_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ACK_LATENCY_SUM_NS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_BUCKET_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_LE_FIELD_NUMBER: _ClassVar[int]
    DISCONNECTS_CLOSED_FIELD_NUMBER: _ClassVar[int]
    DISCONNECTS_ERROR_FIELD_NUMBER: _ClassVar[int]
    DISCONNECTS_NO_MEMORY_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    FIRES_COALESCED_FIELD_NUMBER: _ClassVar[int]
    FIRES_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    FIRE_WRITES_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_RECORDS_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNCS_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNC_BUCKET_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNC_LE_NS_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNC_NS_LAST_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNC_NS_MAX_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNC_NS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNC_RECORDS_BUCKET_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_SYNC_RECORDS_LE_FIELD_NUMBER: _ClassVar[int]
    KICKED_FIELD_NUMBER: _ClassVar[int]
    LATENESS_BUCKET_FIELD_NUMBER: _ClassVar[int]
    LATENESS_LE_NS_FIELD_NUMBER: _ClassVar[int]
    LATENESS_SUM_NS_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_LATENESS_BUCKET_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_LATENESS_SUM_NS_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_QUEUE_WAIT_BUCKET_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_QUEUE_WAIT_SUM_NS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_CPU_NS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_MAX_FDS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_OPEN_FDS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_RESIDENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROCESS_START_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_VIRTUAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAIT_BUCKET_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAIT_SUM_NS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_MAX_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    REFUSED_UID_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    SLOW_CONSUMER_DISCONNECTS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_AGE_NS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_NS_LAST_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_NS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    STORAGE_DOWN_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    TOUCHED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    ack_latency_bucket: _containers.RepeatedScalarFieldContainer[int]
    ack_latency_sum_ns: int
    dead_lettered: int
    deliveries_bucket: _containers.RepeatedScalarFieldContainer[int]
    deliveries_le: _containers.RepeatedScalarFieldContainer[int]
    disconnects_closed: int
    disconnects_error: int
    disconnects_no_memory: int
    errors: _containers.RepeatedScalarFieldContainer[int]
    fire_writes: int
    fires_coalesced: int
    fires_delivered: int
    journal_records: int
    journal_sync_bucket: _containers.RepeatedScalarFieldContainer[int]
    journal_sync_le_ns: _containers.RepeatedScalarFieldContainer[int]
    journal_sync_ns_last: int
    journal_sync_ns_max: int
    journal_sync_ns_total: int
    journal_sync_records_bucket: _containers.RepeatedScalarFieldContainer[int]
    journal_sync_records_le: _containers.RepeatedScalarFieldContainer[int]
    journal_syncs: int
    kicked: int
    lateness_bucket: _containers.RepeatedScalarFieldContainer[int]
    lateness_le_ns: _containers.RepeatedScalarFieldContainer[int]
    lateness_sum_ns: int
    periodic_lateness_bucket: _containers.RepeatedScalarFieldContainer[int]
    periodic_lateness_sum_ns: int
    periodic_queue_wait_bucket: _containers.RepeatedScalarFieldContainer[int]
    periodic_queue_wait_sum_ns: int
    process_cpu_ns: int
    process_max_fds: int
    process_open_fds: int
    process_resident_bytes: int
    process_start_time_ns: int
    process_virtual_bytes: int
    queue_wait_bucket: _containers.RepeatedScalarFieldContainer[int]
    queue_wait_sum_ns: int
    refused_max_clients: int
    refused_memory: int
    refused_uid_budget: int
    released: int
    requests: _containers.RepeatedScalarFieldContainer[int]
    slow_consumer_disconnects: int
    snapshot_age_ns: int
    snapshot_ns_last: int
    snapshot_ns_total: int
    snapshots: int
    storage: bool
    storage_down: bool
    touched: int
    def __init__(self, lateness_le_ns: _Optional[_Iterable[int]] = ..., lateness_bucket: _Optional[_Iterable[int]] = ..., lateness_sum_ns: _Optional[int] = ..., requests: _Optional[_Iterable[int]] = ..., errors: _Optional[_Iterable[int]] = ..., accepted: _Optional[int] = ..., refused_max_clients: _Optional[int] = ..., refused_uid_budget: _Optional[int] = ..., refused_memory: _Optional[int] = ..., slow_consumer_disconnects: _Optional[int] = ..., journal_syncs: _Optional[int] = ..., journal_sync_ns_total: _Optional[int] = ..., journal_sync_ns_last: _Optional[int] = ..., journal_sync_ns_max: _Optional[int] = ..., snapshots: _Optional[int] = ..., snapshot_age_ns: _Optional[int] = ..., storage: bool = ..., storage_down: bool = ..., periodic_lateness_bucket: _Optional[_Iterable[int]] = ..., periodic_lateness_sum_ns: _Optional[int] = ..., journal_sync_le_ns: _Optional[_Iterable[int]] = ..., journal_sync_bucket: _Optional[_Iterable[int]] = ..., snapshot_ns_last: _Optional[int] = ..., snapshot_ns_total: _Optional[int] = ..., fires_delivered: _Optional[int] = ..., disconnects_closed: _Optional[int] = ..., disconnects_error: _Optional[int] = ..., disconnects_no_memory: _Optional[int] = ..., fire_writes: _Optional[int] = ..., fires_coalesced: _Optional[int] = ..., queue_wait_bucket: _Optional[_Iterable[int]] = ..., queue_wait_sum_ns: _Optional[int] = ..., periodic_queue_wait_bucket: _Optional[_Iterable[int]] = ..., periodic_queue_wait_sum_ns: _Optional[int] = ..., ack_latency_bucket: _Optional[_Iterable[int]] = ..., ack_latency_sum_ns: _Optional[int] = ..., process_resident_bytes: _Optional[int] = ..., process_virtual_bytes: _Optional[int] = ..., process_open_fds: _Optional[int] = ..., process_max_fds: _Optional[int] = ..., process_cpu_ns: _Optional[int] = ..., process_start_time_ns: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., released: _Optional[int] = ..., touched: _Optional[int] = ..., kicked: _Optional[int] = ..., deliveries_le: _Optional[_Iterable[int]] = ..., deliveries_bucket: _Optional[_Iterable[int]] = ..., journal_sync_records_le: _Optional[_Iterable[int]] = ..., journal_sync_records_bucket: _Optional[_Iterable[int]] = ..., journal_records: _Optional[int] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ["dead_letter", "explicit", "max_deliveries"]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    EXPLICIT_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    dead_letter: bytes
    explicit: bool
    max_deliveries: int
    def __init__(self, max_deliveries: _Optional[int] = ..., dead_letter: _Optional[bytes] = ..., explicit: bool = ...) -> None: ...

class Release(_message.Message):
    __slots__ = ["delay_ns", "delivery"]
    DELAY_NS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    delay_ns: int
    delivery: int
    def __init__(self, delivery: _Optional[int] = ..., delay_ns: _Optional[int] = ...) -> None: ...

class ReleaseReply(_message.Message):
    __slots__ = ["dead_lettered", "deliveries", "ready_ns", "released"]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    READY_NS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    dead_lettered: bool
    deliveries: int
    ready_ns: int
    released: bool
    def __init__(self, released: bool = ..., dead_lettered: bool = ..., deliveries: _Optional[int] = ..., ready_ns: _Optional[int] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ["calendar", "clock", "deadline_ns", "delay_ns", "jitter_fixed", "jitter_ns", "key", "leeway_ns", "misfire_grace_ns", "payload", "period_ns", "realtime_ns", "replace"]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_NS_FIELD_NUMBER: _ClassVar[int]
    DELAY_NS_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIXED_FIELD_NUMBER: _ClassVar[int]
    JITTER_NS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LEEWAY_NS_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_GRACE_NS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PERIOD_NS_FIELD_NUMBER: _ClassVar[int]
    REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    calendar: str
    clock: Clock
    deadline_ns: int
    delay_ns: int
    jitter_fixed: bool
    jitter_ns: int
    key: int
    leeway_ns: int
    misfire_grace_ns: int
    payload: bytes
    period_ns: int
    realtime_ns: int
    replace: bool
    def __init__(self, key: _Optional[int] = ..., delay_ns: _Optional[int] = ..., deadline_ns: _Optional[int] = ..., realtime_ns: _Optional[int] = ..., calendar: _Optional[str] = ..., period_ns: _Optional[int] = ..., payload: _Optional[bytes] = ..., replace: bool = ..., leeway_ns: _Optional[int] = ..., jitter_ns: _Optional[int] = ..., jitter_fixed: bool = ..., misfire_grace_ns: _Optional[int] = ..., clock: _Optional[_Union[Clock, str]] = ...) -> None: ...

class ScheduleReply(_message.Message):
    __slots__ = ["deadline_ns", "replaced"]
    DEADLINE_NS_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    deadline_ns: int
    replaced: bool
    def __init__(self, deadline_ns: _Optional[int] = ..., replaced: bool = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ["consumers", "dead_lettered", "dead_letters", "delayed", "dropped", "expires_in_ns", "idle_ns", "in_flight", "name", "owner_uid", "pid", "policy", "producers", "queued", "timers"]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    DELAYED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_NS_FIELD_NUMBER: _ClassVar[int]
    IDLE_NS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PRODUCERS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    TIMERS_FIELD_NUMBER: _ClassVar[int]
    consumers: int
    dead_lettered: int
    dead_letters: int
    delayed: int
    dropped: int
    expires_in_ns: int
    idle_ns: int
    in_flight: int
    name: bytes
    owner_uid: int
    pid: int
    policy: Policy
    producers: int
    queued: int
    timers: int
    def __init__(self, name: _Optional[bytes] = ..., owner_uid: _Optional[int] = ..., timers: _Optional[int] = ..., queued: _Optional[int] = ..., in_flight: _Optional[int] = ..., consumers: _Optional[int] = ..., producers: _Optional[int] = ..., idle_ns: _Optional[int] = ..., expires_in_ns: _Optional[int] = ..., dropped: _Optional[int] = ..., pid: _Optional[int] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., dead_letters: _Optional[int] = ..., delayed: _Optional[int] = ..., dead_lettered: _Optional[int] = ...) -> None: ...

class SetPolicy(_message.Message):
    __slots__ = ["dead_letter", "max_deliveries"]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    dead_letter: bytes
    max_deliveries: int
    def __init__(self, max_deliveries: _Optional[int] = ..., dead_letter: _Optional[bytes] = ...) -> None: ...

class SetPolicyReply(_message.Message):
    __slots__ = ["policy"]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: Policy
    def __init__(self, policy: _Optional[_Union[Policy, _Mapping]] = ...) -> None: ...

class Stats(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StatsReply(_message.Message):
    __slots__ = ["acked", "clients", "consumers", "dropped", "expired", "in_flight", "memory_bytes", "metrics", "oneshot", "periodic", "queued", "redelivered", "sessions", "uid_bytes", "uid_connections", "uid_periodic_rate_mhz", "uid_sessions", "uid_timers", "uptime_ns"]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    ONESHOT_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    REDELIVERED_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    UID_BYTES_FIELD_NUMBER: _ClassVar[int]
    UID_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    UID_PERIODIC_RATE_MHZ_FIELD_NUMBER: _ClassVar[int]
    UID_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    UID_TIMERS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_NS_FIELD_NUMBER: _ClassVar[int]
    acked: int
    clients: int
    consumers: int
    dropped: int
    expired: int
    in_flight: int
    memory_bytes: int
    metrics: Metrics
    oneshot: LaneStats
    periodic: LaneStats
    queued: int
    redelivered: int
    sessions: int
    uid_bytes: int
    uid_connections: int
    uid_periodic_rate_mhz: int
    uid_sessions: int
    uid_timers: int
    uptime_ns: int
    def __init__(self, oneshot: _Optional[_Union[LaneStats, _Mapping]] = ..., periodic: _Optional[_Union[LaneStats, _Mapping]] = ..., clients: _Optional[int] = ..., sessions: _Optional[int] = ..., queued: _Optional[int] = ..., dropped: _Optional[int] = ..., uptime_ns: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., expired: _Optional[int] = ..., in_flight: _Optional[int] = ..., consumers: _Optional[int] = ..., acked: _Optional[int] = ..., redelivered: _Optional[int] = ..., uid_connections: _Optional[int] = ..., uid_sessions: _Optional[int] = ..., uid_timers: _Optional[int] = ..., uid_periodic_rate_mhz: _Optional[int] = ..., uid_bytes: _Optional[int] = ..., metrics: _Optional[_Union[Metrics, _Mapping]] = ...) -> None: ...

class TimerInfo(_message.Message):
    __slots__ = ["calendar", "clock", "deadline_ns", "deadline_realtime_ns", "fire_count", "has_payload", "jitter_fixed", "jitter_ns", "key", "lane", "late", "misfire_grace_ns", "payload_bytes", "period_ns"]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_NS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    FIRE_COUNT_FIELD_NUMBER: _ClassVar[int]
    HAS_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIXED_FIELD_NUMBER: _ClassVar[int]
    JITTER_NS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_GRACE_NS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    PERIOD_NS_FIELD_NUMBER: _ClassVar[int]
    calendar: str
    clock: Clock
    deadline_ns: int
    deadline_realtime_ns: int
    fire_count: int
    has_payload: bool
    jitter_fixed: bool
    jitter_ns: int
    key: int
    lane: Lane
    late: bool
    misfire_grace_ns: int
    payload_bytes: int
    period_ns: int
    def __init__(self, key: _Optional[int] = ..., deadline_ns: _Optional[int] = ..., period_ns: _Optional[int] = ..., payload_bytes: _Optional[int] = ..., has_payload: bool = ..., fire_count: _Optional[int] = ..., late: bool = ..., lane: _Optional[_Union[Lane, str]] = ..., deadline_realtime_ns: _Optional[int] = ..., calendar: _Optional[str] = ..., jitter_ns: _Optional[int] = ..., jitter_fixed: bool = ..., misfire_grace_ns: _Optional[int] = ..., clock: _Optional[_Union[Clock, str]] = ...) -> None: ...

class Touch(_message.Message):
    __slots__ = ["delivery", "timeout_ns"]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    delivery: int
    timeout_ns: int
    def __init__(self, delivery: _Optional[int] = ..., timeout_ns: _Optional[int] = ...) -> None: ...

class TouchReply(_message.Message):
    __slots__ = ["ack_deadline_ns", "touched"]
    ACK_DEADLINE_NS_FIELD_NUMBER: _ClassVar[int]
    TOUCHED_FIELD_NUMBER: _ClassVar[int]
    ack_deadline_ns: int
    touched: bool
    def __init__(self, touched: bool = ..., ack_deadline_ns: _Optional[int] = ...) -> None: ...

class ProtocolVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TakeBack(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Clock(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Lane(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
