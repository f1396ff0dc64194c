import { useEffect, useState } from "react";
import { GroupDetail, GroupRow, ResetPreview, api, get } from "./api";
import { Chart } from "./Chart";
import { ErrorBox, href, useLoad } from "./common";

export function Groups() {
  const groups = useLoad(() => get<{ groups: GroupRow[] }>("/api/groups"), [], 10000);
  return (
    <section>
      <h1>Consumer groups</h1>
      <div className="toolbar">
        <button onClick={() => void groups.reload()}>Refresh</button>
      </div>
      <ErrorBox error={groups.error} />
      <table>
        <thead>
          <tr>
            <th>Group</th>
            <th>State</th>
            <th>Protocol</th>
            <th>Members</th>
            <th>Topics</th>
            <th>Total lag</th>
          </tr>
        </thead>
        <tbody>
          {(groups.data?.groups ?? []).map((g) => (
            <tr key={g.group_id} data-testid={`group-row-${g.group_id}`}>
              <td>
                <a href={href("groups", g.group_id)}>{g.group_id}</a>
              </td>
              <td>{g.state}</td>
              <td>{g.protocol || g.protocol_type}</td>
              <td>{g.members}</td>
              <td>{g.topics.join(", ")}</td>
              <td data-testid="group-lag">{g.lag}</td>
            </tr>
          ))}
          {groups.data && groups.data.groups.length === 0 && (
            <tr>
              <td colSpan={6} className="muted">
                No consumer groups.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </section>
  );
}

export function GroupPage({ id }: { id: string }) {
  const group = useLoad(() => get<GroupDetail>(`/api/groups/${encodeURIComponent(id)}`), [id], 5000);
  const [strategy, setStrategy] = useState("earliest");
  const [value, setValue] = useState("");
  const [topic, setTopic] = useState("");
  const [preview, setPreview] = useState<ResetPreview | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const path = `/api/groups/${encodeURIComponent(id)}`;
  // Lag over time, sampled by this page's polling (every 5 s while it is open).
  const [lagHistory, setLagHistory] = useState<[number, number][]>([]);
  useEffect(() => {
    if (group.data) setLagHistory((old) => [...old, [Date.now() / 1000, group.data!.lag] as [number, number]].slice(-180));
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
  const topics = Array.from(new Set((group.data?.offsets ?? []).map((o) => o.topic)));
  return (
    <section>
      <h1>
        Consumer group <span className="mono">{id}</span>
      </h1>
      <p>
        <a href={href("groups")}>All groups</a>
      </p>
      <ErrorBox error={group.error} />
      {group.data && (
        <>
          <dl className="facts">
            <dt>State</dt>
            <dd data-testid="group-state">{group.data.state}</dd>
            <dt>Protocol</dt>
            <dd>{group.data.protocol || "–"}</dd>
            <dt>Total lag</dt>
            <dd data-testid="group-total-lag">{group.data.lag}</dd>
          </dl>
          <h2>Lag over time</h2>
          <Chart
            title="Total lag (sampled every 5 s while this page is open)"
            unit="messages"
            series={[{ label: "lag", color: "#dc2626" }]}
            data={[lagHistory.map((p) => p[0]), lagHistory.map((p) => p[1])]}
          />
          <h2>Members</h2>
          {group.data.members.length === 0 ? (
            <p className="muted">No members (the group is empty: its offsets can be reset).</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>Member</th>
                  <th>Client</th>
                  <th>Host</th>
                  <th>Assignment</th>
                </tr>
              </thead>
              <tbody>
                {group.data.members.map((m) => (
                  <tr key={m.member_id}>
                    <td className="mono clip">{m.member_id}</td>
                    <td>{m.client_id}</td>
                    <td>{m.host}</td>
                    <td>{m.assignment.map((a) => `${a.topic}/${a.partition}`).join(", ")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h2>Offsets</h2>
          <table>
            <thead>
              <tr>
                <th>Topic</th>
                <th>Partition</th>
                <th>Committed</th>
                <th>Log end</th>
                <th>Lag</th>
                <th>Member</th>
              </tr>
            </thead>
            <tbody>
              {group.data.offsets.map((o) => (
                <tr key={`${o.topic}-${o.partition}`}>
                  <td>{o.topic}</td>
                  <td>{o.partition}</td>
                  <td>{o.committed ?? "–"}</td>
                  <td>{o.log_end_offset ?? "–"}</td>
                  <td>{o.lag ?? "–"}</td>
                  <td className="mono clip">{o.member_id ?? ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <h2>Reset offsets</h2>
      <div className="panel">
        <label>
          Topic
          <select aria-label="Reset topic" value={topic} onChange={(e) => setTopic(e.target.value)}>
            <option value="">all committed</option>
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
            <option value="shift">shift by N</option>
            <option value="offset">specific offset</option>
          </select>
        </label>
        {strategy !== "earliest" && strategy !== "latest" && (
          <label>
            {strategy === "timestamp" ? "Time (UTC)" : strategy === "shift" ? "N (negative rewinds)" : "Offset"}
            <input
              aria-label="Reset value"
              type={strategy === "timestamp" ? "datetime-local" : "text"}
              step="1"
              value={value}
              onChange={(e) => setValue(e.target.value)}
            />
          </label>
        )}
        <button onClick={() => void run(async () => setPreview(await api<ResetPreview>("POST", `${path}/reset-preview`, body())))}>
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
                  <th>Old</th>
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
            {!preview.can_apply && <p className="error">The group is {preview.state}: stop its consumers before resetting.</p>}
            <button
              disabled={!preview.can_apply}
              onClick={() =>
                void run(async () => {
                  await api("POST", `${path}/reset`, body());
                  setPreview(null);
                  setStatus("Offsets reset.");
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
        <label className="inline">
          <input type="checkbox" checked={confirmDelete} onChange={(e) => setConfirmDelete(e.target.checked)} /> I want to delete
          group {id} and its committed offsets
        </label>{" "}
        <button
          className="danger"
          disabled={!confirmDelete}
          onClick={() =>
            void run(async () => {
              await api("DELETE", path);
              window.location.hash = href("groups");
            })
          }
        >
          Delete group
        </button>
      </div>
    </section>
  );
}
