// The console's JSON API (/api, described at /api/openapi.json). Every state-changing call
// carries the session's CSRF token; errors arrive as {"error": sentence}.

let csrfToken = "";

export class ApiError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

export function setCsrf(token: string): void {
  csrfToken = token;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (method !== "GET") headers["X-CSRF-Token"] = csrfToken;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "the console server cannot be reached");
  }
  const text = await response.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message =
      data && typeof data === "object" && "error" in data
        ? String((data as { error: unknown }).error)
        : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message);
  }
  return data as T;
}

export const get = <T,>(path: string) => api<T>("GET", path);

export interface Session {
  signed_in: boolean;
  user: string | null;
  csrf_token: string;
  password_required: boolean;
  sasl_mechanism?: string | null;
  client_certificates?: boolean;
  bootstrap: string;
}
export interface Acl {
  resource_type: string;
  name: string;
  pattern_type: string;
  principal: string;
  host: string;
  operation: string;
  permission: string;
}
export interface AclList {
  enabled: boolean;
  acls: Acl[];
  reason?: string;
}
export interface ScramUser {
  name: string;
  mechanisms: { mechanism: string; iterations: number }[];
}
export interface TxnPartition {
  topic: string;
  partition: number;
  start_offset?: number;
  error?: string;
}
export interface Transaction {
  transactional_id: string;
  producer_id: number;
  producer_epoch?: number;
  state: string;
  timeout_ms?: number;
  start_time_ms?: number | null;
  duration_ms?: number | null;
  partitions?: TxnPartition[];
  error?: string;
}
export interface Broker {
  id: number;
  host: string;
  port: number;
  controller: boolean;
  partitions_led: number;
  up: boolean;
}
export interface ClusterInfo {
  reachable: boolean;
  error?: string;
  cluster_id?: string;
  controller_id?: number;
  brokers: Broker[];
  topics?: number;
  partitions?: number;
  bootstrap: string;
  metrics: { url: string; up: boolean | null; error: string | null; disk_bytes: number | null }[];
}
export interface Point {
  t: number;
  messages_in: number;
  messages_out: number;
  bytes_in: number;
  bytes_out: number;
  produce_p99_ms: number | null;
  fetch_p99_ms: number | null;
}
export interface TopicRow {
  name: string;
  internal: boolean;
  partitions: number;
  replicas: number;
  under_replicated: number;
  messages: number | null;
  size: number | null;
  retention_ms: number | null;
}
export interface PartitionRow {
  partition: number;
  leader: number;
  replicas: number[];
  isr: number[];
  log_start_offset: number;
  log_end_offset: number;
  size: number | null;
}
export interface ConfigRow {
  name: string;
  value: string | null;
  default: boolean;
  read_only: boolean;
  source: string;
}
export interface TopicDetail {
  name: string;
  partitions: PartitionRow[];
  configs: ConfigRow[];
}
export interface Raw {
  text: string | null;
  base64?: string; // left out of compact pages when `text` holds the bytes
  size: number;
}
export interface Msg {
  topic: string;
  partition: number;
  offset: number;
  timestamp: number | null;
  key: string | null;
  value: string | null;
  key_raw: Raw | null;
  value_raw: Raw | null;
  headers: [string, string | null][];
}
export interface MessagePage {
  messages: Msg[];
  scanned: number;
  partitions: { partition: number; log_start_offset: number; log_end_offset: number }[];
}
export interface GroupRow {
  group_id: string;
  state: string;
  protocol_type: string;
  protocol: string;
  members: number;
  topics: string[];
  lag: number;
}
export interface GroupOffset {
  topic: string;
  partition: number;
  committed: number | null;
  log_end_offset: number | null;
  lag: number | null;
  member_id: string | null;
}
export interface GroupDetail {
  group_id: string;
  state: string;
  protocol: string;
  lag: number;
  members: {
    member_id: string;
    client_id: string;
    host: string;
    assignment: { topic: string; partition: number }[];
  }[];
  offsets: GroupOffset[];
}
export interface ResetRow {
  topic: string;
  partition: number;
  old: number | null;
  new: number;
  log_start_offset: number;
  log_end_offset: number;
  lag_after: number;
}
export interface ResetPreview {
  group_id: string;
  state: string;
  strategy: string;
  offsets: ResetRow[];
  can_apply: boolean;
}
export interface AuditEntry {
  time: string;
  user: string;
  action: string;
  target: string;
  details: Record<string, unknown>;
  ok: boolean;
  error?: string;
}

export interface ShareGroupRow {
  group_id: string;
  state: string;
  members: number;
  partitions: number;
  topics: string[];
  lag: number;
}

export interface ShareGroupList {
  supported: boolean;
  reason?: string;
  groups: ShareGroupRow[];
  truncated?: boolean;
}

export interface ShareMember {
  member_id: string;
  client_id: string;
  host: string;
  member_epoch: number;
  subscribed_topics: string[];
  assignment: { topic: string; partition: number }[];
}

export interface SharePartition {
  topic: string;
  partition: number;
  start_offset: number | null;
  log_end_offset: number | null;
  lag: number | null;
  lag_source: "broker" | "log_end_minus_spso" | null;
  error: string | null;
  members: string[];
  acquired: number | null;
  in_flight: number | null;
}

export interface ShareGroupDetail {
  group_id: string;
  state: string;
  group_epoch: number;
  assignment_epoch: number;
  assignor: string;
  members: ShareMember[];
  partitions: SharePartition[];
  lag: number;
  sampled_at: number;
  warning: string | null;
}

export interface ShareResetPreview {
  group_id: string;
  state: string;
  members: number;
  strategy: string;
  offsets: ResetRow[];
  can_apply: boolean;
}
