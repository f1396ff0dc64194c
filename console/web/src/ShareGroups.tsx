import { useEffect, useState } from "react";
import { ShareGroupDetail, ShareGroupList, ShareResetPreview, api, get } from "./api";
import { Chart } from "./Chart";
import { ErrorBox, href, useLoad } from "./common";

// Share groups (KIP-932): records shared by the members, each partition's progress kept as its
// start offset (SPSO) rather than a committed offset.
export function ShareGroups() {
  const groups = useLoad(() => get<ShareGroupList>("/api/share-groups"), [], 10000);
  const data = groups.data;
  return (
    <section>
      <h1>Share groups</h1>
      <div className="toolbar">
        <button onClick={() => void groups.reload()}>Refresh</button>
      </div>
      <ErrorBox error={groups.error} />
      {data && !data.supported && (
        <p className="panel" role="status" data-testid="share-unsupported">
          {data.reason}
        </p>
      )}
      {data?.supported && (
        <table>
          <thead>
            <tr>
              <th>Share group</th>
              <th>State</th>
              <th>Members</th>
              <th>Topics</th>
              <th>Partitions</th>
              <th>Total lag</th>
            </tr>
          </thead>
          <tbody>
            {data.groups.map((g) => (
              <tr key={g.group_id} data-testid={`share-row-${g.group_id}`}>
                <td>
                  <a href={href("share-groups", g.group_id)}>{g.group_id}</a>
                </td>
                <td>{g.state}</td>
                <td>{g.members}</td>
                <td>{g.topics.join(", ")}</td>
                <td>{g.partitions}</td>
                <td data-testid="share-lag">{g.lag}</td>
              </tr>
            ))}
            {data.groups.length === 0 && (
              <tr>
                <td colSpan={6} className="muted">
                  No share groups.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function ShareGroupPage({ id }: { id: string }) {
  const path = `/api/share-groups/${encodeURIComponent(id)}`;
  const group = useLoad(() => get<ShareGroupDetail>(path), [id], 5000);
  const [strategy, setStrategy] = useState("earliest");
  const [value, setValue] = useState("");
  const [topic, setTopic] = useState("");
  const [preview, setPreview] = useState<ShareResetPreview | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [confirm, setConfirm] = useState("");
  // Lag over time, sampled by this page's polling (every 5 s while it is open), as the
  // consumer group page does; x is the server's sampling time.
  const [lagHistory, setLagHistory] = useState<[number, number][]>([]);
  useEffect(() => {
    if (group.data) setLagHistory((old) => [...old, [group.data!.sampled_at / 1000, group.data!.lag] as [number, number]].slice(-180));
  }, [group.data]);
  const body = () => ({
    strategy,
    topic: topic || null,
    value: strategy === "timestamp" ? (value ? Date.parse(value + "Z") : null) : value === "" ? null : Number(value),
  });
  const run = async (action: () => Promise<void>) => {
    try {
      await action();
      setError(null);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  const d = group.data;
  const topics = Array.from(new Set((d?.partitions ?? []).map((p) => p.topic)));
  return (
    <section>
      <h1>
        Share group <span className="mono">{id}</span>
      </h1>
      <p>
        <a href={href("share-groups")}>All share groups</a>
      </p>
      <ErrorBox error={group.error} />
      {d && (
        <>
          {d.warning && <p className="muted">{d.warning}</p>}
          <dl className="facts">
            <dt>State</dt>
            <dd data-testid="share-state">{d.state}</dd>
            <dt>Group epoch</dt>
            <dd>{d.group_epoch}</dd>
            <dt>Assignor</dt>
            <dd>{d.assignor || "–"}</dd>
            <dt>Total lag</dt>
            <dd data-testid="share-total-lag">{d.lag}</dd>
          </dl>
          <h2>Lag over time</h2>
          <Chart
            title="Total lag (sampled every 5 s while this page is open)"
            unit="records"
            series={[{ label: "lag", color: "#dc2626" }]}
            data={[lagHistory.map((p) => p[0]), lagHistory.map((p) => p[1])]}
          />
          <p className="muted" data-testid="share-lag-samples" data-samples={lagHistory.length} data-last={lagHistory.length ? lagHistory[lagHistory.length - 1][1] : ""}>
            {lagHistory.length} samples; the last {lagHistory.length ? lagHistory[lagHistory.length - 1][1] : "–"} records.
          </p>
          <h2>Members</h2>
          {d.members.length === 0 ? (
            <p className="muted">No members (the group is empty: its start offsets can be reset).</p>
          ) : (
            <table aria-label="Members">
              <thead>
                <tr>
                  <th>Member</th>
                  <th>Client</th>
                  <th>Host</th>
                  <th>Epoch</th>
                  <th>Assignment</th>
                </tr>
              </thead>
              <tbody>
                {d.members.map((m) => (
                  <tr key={m.member_id} data-testid="share-member">
                    <td className="mono clip">{m.member_id}</td>
                    <td>{m.client_id}</td>
                    <td>{m.host}</td>
                    <td>{m.member_epoch}</td>
                    <td>{m.assignment.map((a) => `${a.topic}/${a.partition}`).join(", ")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h2>Partitions</h2>
          <p className="muted">
            The start offset (SPSO) is the first record not yet acknowledged or archived; lag counts the records from there to the log end that are not yet
            done. Acquired (locked by a member now) and in flight (offsets from the start offset to the end of the in-flight window) come from the broker's
            /metrics, when it has them.
          </p>
          <table aria-label="Partitions">
            <thead>
              <tr>
                <th>Topic</th>
                <th>Partition</th>
                <th>Start offset</th>
                <th>Log end</th>
                <th>Lag</th>
                <th>Acquired</th>
                <th>In flight</th>
                <th>Members</th>
              </tr>
            </thead>
            <tbody>
              {d.partitions.map((p) => (
                <tr key={`${p.topic}-${p.partition}`}>
                  <td>{p.topic}</td>
                  <td>{p.partition}</td>
                  <td>{p.start_offset ?? "–"}</td>
                  <td>{p.log_end_offset ?? "–"}</td>
                  <td>{p.error ?? p.lag ?? "–"}</td>
                  <td>{p.acquired ?? "–"}</td>
                  <td>{p.in_flight ?? "–"}</td>
                  <td>{p.members.length}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <h2>Reset start offsets</h2>
      <div className="panel">
        <label>
          Topic
          <select aria-label="Reset topic" value={topic} onChange={(e) => setTopic(e.target.value)}>
            <option value="">all with start offsets</option>
            {topics.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </label>
        <label>
          Strategy
          <select aria-label="Reset strategy" value={strategy} onChange={(e) => setStrategy(e.target.value)}>
            <option value="earliest">earliest</option>
            <option value="latest">latest</option>
            <option value="timestamp">timestamp</option>
            <option value="offset">specific offset</option>
          </select>
        </label>
        {(strategy === "timestamp" || strategy === "offset") && (
          <label>
            {strategy === "timestamp" ? "Time (UTC)" : "Offset"}
            <input
              aria-label="Reset value"
              type={strategy === "timestamp" ? "datetime-local" : "text"}
              step="1"
              value={value}
              onChange={(e) => setValue(e.target.value)}
            />
          </label>
        )}
        <button onClick={() => void run(async () => setPreview(await api<ShareResetPreview>("POST", `${path}/reset-preview`, body())))}>
          Preview
        </button>
        <ErrorBox error={error} />
        {status && <p role="status">{status}</p>}
        {preview && (
          <>
            <table aria-label="Reset preview">
              <thead>
                <tr>
                  <th>Topic</th>
                  <th>Partition</th>
                  <th>Start offset now</th>
                  <th>New</th>
                  <th>Log start–end</th>
                  <th>Lag after</th>
                </tr>
              </thead>
              <tbody>
                {preview.offsets.map((r) => (
                  <tr key={`${r.topic}-${r.partition}`}>
                    <td>{r.topic}</td>
                    <td>{r.partition}</td>
                    <td>{r.old ?? "–"}</td>
                    <td>
                      <strong>{r.new}</strong>
                    </td>
                    <td>
                      {r.log_start_offset}–{r.log_end_offset}
                    </td>
                    <td>{r.lag_after}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {!preview.can_apply && (
              <p className="error">
                The group is {preview.state} with {preview.members} members: stop its consumers before resetting (Kafka refuses with NON_EMPTY_GROUP).
              </p>
            )}
            <button
              disabled={!preview.can_apply}
              onClick={() =>
                void run(async () => {
                  await api("POST", `${path}/reset`, body());
                  setPreview(null);
                  setStatus("Start offsets reset.");
                  await group.reload();
                })
              }
            >
              Apply reset
            </button>
          </>
        )}
      </div>
      <h2>Delete</h2>
      <div className="panel danger">
        <label>
          Type the group's id to delete it and its share state{" "}
          <input aria-label="Confirm share group id" value={confirm} onChange={(e) => setConfirm(e.target.value)} />
        </label>{" "}
        <button
          className="danger"
          disabled={confirm !== id}
          onClick={() =>
            void run(async () => {
              await api("DELETE", path, { confirm: id });
              window.location.hash = href("share-groups");
            })
          }
        >
          Delete share group
        </button>
      </div>
    </section>
  );
}
