// What the Node-only modules of zarrita's storage package import, for a page that never calls them.
export const Buffer = {};
export default {};
