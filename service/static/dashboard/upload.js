// A CSV or .npy file as data set chunks: its width, its number type and bodies of at most CHUNK_BYTES
// (the service's default body limit is 64 MiB). Cost O(file size) in memory, once.

export const CHUNK_BYTES = 8 * 1024 * 1024;

function isNumber(field) {
  const text = field.trim().replace(/^"|"$/g, "");
  return text !== "" && !Number.isNaN(Number(text));
}

// {nFeatures, dtype, contentType, chunks: [Blob | string]} of a CSV text: lines split into chunks of about
// CHUNK_BYTES; a first line with no number in it is a header and goes with the first chunk.
export function csvChunks(text) {
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/).filter((line) => line.trim() !== "");
  if (!lines.length) throw new Error("the CSV file holds no rows");
  const header = lines[0].split(",").some(isNumber) ? null : lines.shift();
  if (!lines.length) throw new Error("the CSV file holds a header but no rows");
  const nFeatures = lines[0].split(",").length;
  const chunks = [];
  let part = header ? [header] : [];
  let size = 0;
  for (const line of lines) {
    part.push(line);
    size += line.length + 1;
    if (size >= CHUNK_BYTES) {
      chunks.push(part.join("\n") + "\n");
      part = [];
      size = 0;
    }
  }
  if (part.length) chunks.push(part.join("\n") + "\n");
  return { nFeatures, dtype: "float64", contentType: "text/csv", chunks };
}

function npyHeader(bytes) {
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
  if (bytes.length < 10 || magic.some((b, i) => bytes[i] !== b)) throw new Error("not a .npy file");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const major = bytes[6];
  const start = major === 1 ? 10 : 12;
  const length = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const text = new TextDecoder("latin1").decode(bytes.subarray(start, start + length));
  const descr = /'descr':\s*'([^']+)'/.exec(text);
  const fortran = /'fortran_order':\s*(True|False)/.exec(text);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(text);
  if (!descr || !fortran || !shape) throw new Error("unreadable .npy header: " + text.trim());
  const dims = shape[1].split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  return { descr: descr[1], fortran: fortran[1] === "True", dims, offset: start + length };
}

function npyBytes(descr, rows, nFeatures, data) {
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${rows}, ${nFeatures}), }`;
  const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
  dict = dict.padEnd(total - 10 - 1, " ") + "\n";
  const out = new Uint8Array(total + data.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, dict.length & 0xff, dict.length >> 8]);
  out.set(new TextEncoder().encode(dict), 10);
  out.set(data, total);
  return out;
}

// The same for .npy bytes of a 2-D array: sent as is when small, else re-cut into row blocks.
export function npyChunks(bytes) {
  const header = npyHeader(bytes);
  if (header.dims.length !== 2) throw new Error(`the .npy array has shape (${header.dims}); send a 2-D array (rows x features)`);
  const [rows, nFeatures] = header.dims;
  const dtype = /f4$/.test(header.descr) ? "float32" : "float64";
  const base = { nFeatures, dtype, contentType: "application/octet-stream" };
  if (bytes.length <= CHUNK_BYTES || header.fortran) return Object.assign(base, { chunks: [bytes] });
  const rowBytes = (bytes.length - header.offset) / rows;
  const perChunk = Math.max(1, Math.floor(CHUNK_BYTES / rowBytes));
  const chunks = [];
  for (let row = 0; row < rows; row += perChunk) {
    const count = Math.min(perChunk, rows - row);
    const data = bytes.subarray(header.offset + row * rowBytes, header.offset + (row + count) * rowBytes);
    chunks.push(npyBytes(header.descr, count, nFeatures, data));
  }
  return Object.assign(base, { chunks });
}
