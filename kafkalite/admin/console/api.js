// The console's only way to the cluster: the admin API's JSON routes (so it obeys whatever
// authentication and ACLs the API enforces). Credentials typed in the login page are kept in
// this tab's sessionStorage and sent in the Authorization header, never in a URL; a 401 sends
// the console to its login page.
const AUTH_KEY = "kafkalite.authorization";

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export function authorization() { return sessionStorage.getItem(AUTH_KEY); }
export function setAuthorization(value) {
  if (value) sessionStorage.setItem(AUTH_KEY, value);
  else sessionStorage.removeItem(AUTH_KEY);
}

/** Where to go when the API asks for credentials (the console sets it to its login page). */
let onUnauthorized = () => {};
export function whenUnauthorized(fn) { onUnauthorized = fn; }

export async function call(method, path, body, { authorization: given } = {}) {
  // the marker header makes a 401 challenge the console, not the browser's own dialog
  const init = { method, headers: { "X-Kafkalite-Console": "1" }, credentials: "omit" };
  const auth = given ?? authorization();
  if (auth) init.headers.Authorization = auth;
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (response.status === 401 && given === undefined) onUnauthorized();
  if (!response.ok) throw new ApiError(response.status, data);
  return { data, total: Number(response.headers.get("X-Total-Count") ?? NaN) };
}

export const get = async (path) => (await call("GET", path)).data;
export const getPage = (path) => call("GET", path);
export const post = async (path, body) => (await call("POST", path, body)).data;
export const patch = async (path, body) => (await call("PATCH", path, body)).data;
export const del = async (path) => (await call("DELETE", path)).data;
export const enc = encodeURIComponent;
