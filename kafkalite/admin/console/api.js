// The console's only way to the cluster: the admin API's JSON routes (so it obeys whatever
// authentication and ACLs the API enforces).
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export async function call(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) throw new ApiError(response.status, data);
  return { data, total: Number(response.headers.get("X-Total-Count") ?? NaN) };
}

export const get = async (path) => (await call("GET", path)).data;
export const getPage = (path) => call("GET", path);
export const post = async (path, body) => (await call("POST", path, body)).data;
export const patch = async (path, body) => (await call("PATCH", path, body)).data;
export const del = async (path) => (await call("DELETE", path)).data;
export const enc = encodeURIComponent;
