// Files in and out of a call, the template environment, and resources,
// with the TypeScript SDK client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TEST_TIMEOUT_MS, connectClient, closeClient, runPython, randomToken } from './lib/common.mjs';

const opts = { timeout: TEST_TIMEOUT_MS };
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

async function withClient(name, fn) {
  const c = await connectClient(name);
  try {
    return await fn(c.client);
  } finally {
    await closeClient(c);
  }
}

test('template environment: a matplotlib plot saved to output/ comes back as a PNG image', opts, async () => {
  await withClient('files-plot', async (client) => {
    const r = await runPython(client, {
      code: [
        'import numpy as np, pandas as pd, matplotlib.pyplot as plt',
        'from PIL import Image',
        'df = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})',
        'df.plot(x="x", y="y"); plt.savefig("output/plot.png")',
        'print(Image.open("output/plot.png").size)',
      ].join('\n'),
    });
    assert.equal(r.isError, false, JSON.stringify(r));
    const img = r.content.find((b) => b.type === 'image');
    assert.ok(img, `an image block: ${JSON.stringify(r.content.map((b) => b.type))}`);
    assert.equal(img.mimeType, 'image/png');
    const bytes = Buffer.from(img.data, 'base64');
    assert.deepEqual(bytes.subarray(0, 8), PNG_MAGIC, 'valid PNG signature');
    assert.equal(bytes.readUInt32BE(16), 640, 'PNG width from IHDR');
    assert.equal(r.structuredContent.stdout, '(640, 480)\n');
    const f = r.structuredContent.files.find((x) => x.name === 'plot.png');
    assert.deepEqual(f, { name: 'plot.png', size: bytes.length, mime_type: 'image/png', inlined: true });
  });
});

test('output files: text as embedded text, binary as blob, unchanged files not sent again', opts, async () => {
  await withClient('files-kinds', async (client) => {
    const r = await runPython(client, {
      code: [
        'import os',
        'os.makedirs("output/sub", exist_ok=True)',
        'open("output/data.csv", "w").write("a,b\\n1,2\\n")',
        'open("output/sub/pic.svg", "w").write("<svg xmlns=\\"http://www.w3.org/2000/svg\\"/>")',
        'open("output/noext", "wb").write(bytes(range(256)))',
      ].join('\n'),
    });
    assert.equal(r.isError, false, JSON.stringify(r));
    const res = (uri) => r.content.find((b) => b.type === 'resource' && b.resource.uri === uri)?.resource;
    assert.deepEqual(res('file:///work/output/data.csv'),
      { uri: 'file:///work/output/data.csv', mimeType: 'text/csv', text: 'a,b\n1,2\n' });
    assert.equal(res('file:///work/output/sub/pic.svg').mimeType, 'image/svg+xml');
    const blob = res('file:///work/output/noext');
    assert.equal(blob.mimeType, 'application/octet-stream');
    assert.deepEqual(Buffer.from(blob.blob, 'base64'), Buffer.from([...Array(256).keys()]));
    assert.deepEqual(r.structuredContent.files.map((f) => f.name), ['data.csv', 'noext', 'sub/pic.svg']);
    // Nothing changed: nothing comes back; a changed file comes back alone.
    const again = await runPython(client, { code: 'open("output/data.csv", "a").write("3,4\\n")' });
    assert.deepEqual(again.structuredContent.files.map((f) => f.name), ['data.csv']);
    const none = await runPython(client, { code: 'print("quiet")' });
    assert.deepEqual(none.structuredContent.files, []);
  });
});

test('output files beyond the per-file limit are listed as resource_link, not inlined', opts, async () => {
  await withClient('files-big', async (client) => {
    const r = await runPython(client, { code: 'open("output/big.bin", "wb").write(b"\\0" * (11 * 1024 * 1024))' });
    const link = r.content.find((b) => b.type === 'resource_link');
    assert.ok(link, JSON.stringify(r.content.map((b) => b.type)));
    assert.equal(link.uri, 'file:///work/output/big.bin');
    assert.equal(link.size, 11 * 1024 * 1024);
    const f = r.structuredContent.files[0];
    assert.equal(f.inlined, false);
    assert.match(f.reason, /per-file limit/);
  });
});

test('links, and files that are not regular, are skipped and reported, never read', opts, async () => {
  await withClient('files-links', async (client) => {
    const r = await runPython(client, {
      code: [
        'import os',
        'os.symlink("/etc/passwd", "output/passwd")',
        'os.symlink("/proc/self/environ", "output/environ")',
        'open("output/real.txt", "w").write("ok")',
      ].join('\n'),
    });
    assert.equal(r.isError, false, JSON.stringify(r));
    const skipped = r.structuredContent.skipped_files.map((s) => s.name).sort();
    assert.deepEqual(skipped, ['environ', 'passwd']);
    assert.deepEqual(r.structuredContent.files.map((f) => f.name), ['real.txt']);
    assert.ok(!JSON.stringify(r).includes('root:x:0'), 'no passwd content leaked');
  });
});

test('/tmp and /dev/shm do not persist: a call finds neither what an earlier call of its session left there (files, folders without permissions, links, FIFOs) nor anything a link pointed to outside them', opts, async () => {
  await withClient('files-tmp', async (client) => {
    const first = await runPython(client, {
      code: [
        'import os',
        'open("/tmp/x", "w").write("x" * 100000)',
        'open("/dev/shm/y", "w").write("y")',
        'os.makedirs("/tmp/d/e/f"); open("/tmp/d/e/f/g", "w").write("g")',
        'os.makedirs("/tmp/locked/inner"); open("/tmp/locked/inner/z", "w").write("z")',
        'os.chmod("/tmp/locked/inner", 0); os.chmod("/tmp/locked", 0)',
        'open("/work/keep.txt", "w").write("kept")',
        'os.symlink("/work", "/tmp/work-link")',
        'os.symlink("/work/keep.txt", "/dev/shm/keep-link")',
        'os.mkfifo("/tmp/fifo")',
        'print(sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))',
      ].join('\n'),
    });
    assert.equal(first.isError, false, JSON.stringify(first));
    assert.equal(first.structuredContent.stdout, "['d', 'fifo', 'locked', 'work-link', 'x'] ['keep-link', 'y']\n");
    // A JavaScript call in between writes there too (Node.js is optional).
    if ((await client.listTools()).tools.some((t) => t.name === 'execute_javascript')) {
      const js = await client.callTool({
        name: 'execute_javascript',
        arguments: { code: "require('fs').writeFileSync('/tmp/from-js', 'js'); console.log(require('fs').readdirSync('/tmp').join(','))" },
      }, undefined, { timeout: TEST_TIMEOUT_MS });
      assert.equal(js.structuredContent?.stdout, 'from-js\n', `the JavaScript call found /tmp empty too: ${JSON.stringify(js)}`);
    }
    const next = await runPython(client, {
      code: 'import os; print(os.listdir("/tmp"), os.listdir("/dev/shm"), open("/work/keep.txt").read(), os.path.isdir("/work"))',
    });
    assert.equal(next.structuredContent.stdout, '[] [] kept True\n', JSON.stringify(next.structuredContent));
  });
});

test('input files: text and base64 are written before the code runs; bad paths are refused', opts, async () => {
  await withClient('files-input', async (client) => {
    const secret = randomToken();
    const r = await runPython(client, {
      code: 'print(open("in/a.txt").read(), open("in/b.bin", "rb").read().hex())',
      files: [
        { path: 'in/a.txt', text: secret },
        { path: 'in/b.bin', base64: Buffer.from([0, 1, 254, 255]).toString('base64') },
      ],
    });
    assert.equal(r.structuredContent.stdout, `${secret} 0001feff\n`);
    for (const path of ['/etc/x', '../x', 'a/../../x', 'a//b', '']) {
      const bad = await runPython(client, { code: 'print(1)', files: [{ path, text: 'x' }] });
      assert.equal(bad.isError, true, path);
      assert.match(bad.content[0].text, /Invalid arguments: files\[0\]/, path);
    }
    const badB64 = await runPython(client, { code: 'print(1)', files: [{ path: 'x', base64: '!!!' }] });
    assert.match(badB64.content[0].text, /not valid base64/);
    // Writing through a symlink that the code planted is refused.
    await runPython(client, { code: 'import os; os.symlink("/tmp", "lnk")' });
    const through = await runPython(client, { code: 'print(1)', files: [{ path: 'lnk/x', text: 'x' }] });
    assert.equal(through.isError, true, JSON.stringify(through));
    assert.match(through.structuredContent.stderr, /cannot write the input files/);
  });
});

test('resources: output files are listed and readable; paths outside the workspace are not', opts, async () => {
  await withClient('files-resources', async (client) => {
    assert.ok(client.getServerCapabilities().resources, 'resources capability');
    await runPython(client, { code: 'open("output/r.txt", "w").write("resource body")' });
    const list = await client.listResources();
    assert.deepEqual(list.resources.map((x) => x.uri), ['file:///work/output/r.txt']);
    const read = await client.readResource({ uri: 'file:///work/output/r.txt' });
    assert.equal(read.contents[0].text, 'resource body');
    await assert.rejects(client.readResource({ uri: 'file:///work/../etc/passwd' }));
    await assert.rejects(client.readResource({ uri: 'file:///etc/passwd' }));
    await assert.rejects(client.readResource({ uri: 'file:///work/output/missing' }));
  });
});

test('resources/list and resources/read wait for a running call of their session (serialized like calls)', opts, async () => {
  await withClient('files-serialized', async (client) => {
    await runPython(client, { code: 'open("output/before.txt", "w").write("before")' });
    // A call that writes its file only at its end, 3 s in.
    const t0 = Date.now();
    const call = runPython(client, { code: 'import time\ntime.sleep(3)\nopen("output/during.txt", "w").write("late")' })
      .then(() => Date.now() - t0);
    await new Promise((r) => setTimeout(r, 1000)); // the call runs
    const list = await client.listResources();
    const listed = Date.now() - t0;
    const callDone = await call;
    assert.ok(listed >= callDone - 250, `the listing came after the call ended (${listed} ms, the call ${callDone} ms)`);
    assert.ok(
      list.resources.some((x) => x.uri === 'file:///work/output/during.txt'),
      `the listing sees what the call wrote at its end: ${JSON.stringify(list.resources.map((x) => x.uri))}`,
    );
    const t1 = Date.now();
    const call2 = runPython(client, { code: 'import time\ntime.sleep(2)\nopen("output/before.txt", "w").write("after")' })
      .then(() => Date.now() - t1);
    await new Promise((r) => setTimeout(r, 700));
    const read = await client.readResource({ uri: 'file:///work/output/before.txt' });
    assert.equal(read.contents[0].text, 'after', 'the read waited for the call that rewrote the file');
    assert.ok(Date.now() - t1 >= (await call2) - 250, 'and came after it');
  });
});

test('resources/list pages a workspace of thousands of long, non-UTF-8 names: bounded answers, a cursor, every file once; the call that made them gets a bounded result', opts, async (t) => {
  await withClient('files-many', async (client) => {
    const n = 2500;
    // 200 bytes of 0xff and a number: 600 bytes of URI and of name each.
    const r = await runPython(client, {
      code: [
        'import os',
        'os.makedirs("output/many", exist_ok=True)',
        `for i in range(${n}):`,
        '    fd = os.open(b"output/many/" + b"\\xff" * 200 + b"-%05d" % i, os.O_WRONLY | os.O_CREAT, 0o644)',
        '    os.close(fd)',
        'for i in range(300):',
        '    os.symlink("/etc/passwd", b"output/link-" + b"\\xfe" * 150 + b"-%03d" % i)',
        'print("made")',
      ].join('\n'),
      timeout_seconds: 110,
    });
    assert.equal(r.structuredContent.stdout, 'made\n', JSON.stringify(r.structuredContent).slice(0, 500));
    const callBytes = JSON.stringify(r).length;
    t.diagnostic(`the call's result: ${callBytes} bytes, ${r.structuredContent.files.length} files, ${r.structuredContent.skipped_files.length} skipped`);
    assert.ok(callBytes < 1 << 20, `the result of the call is bounded: ${callBytes} bytes`);
    assert.ok(r.structuredContent.skipped_files.length <= 20 && r.structuredContent.files.length <= 60, "the lists are bounded");
    assert.match(r.content.map((c) => c.text || "").join(" "), /more files changed/, "and say that there is more");
    const seen = new Set();
    let cursor, pages = 0, largest = 0;
    do {
      const t0 = Date.now();
      const page = await client.listResources(cursor ? { cursor } : {});
      const bytes = JSON.stringify(page).length;
      largest = Math.max(largest, bytes);
      assert.ok(bytes < 512 * 1024, `page ${pages}: ${bytes} bytes in ${Date.now() - t0} ms`);
      for (const res of page.resources) {
        assert.ok(!seen.has(res.uri), `listed once: ${res.uri.slice(0, 80)}`);
        seen.add(res.uri);
      }
      cursor = page.nextCursor;
      pages++;
      assert.ok(pages < 200, 'the pages end');
    } while (cursor);
    t.diagnostic(`${seen.size} resources in ${pages} pages, the largest ${largest} bytes`);
    assert.equal(seen.size, n, 'every regular file, once');
    await assert.rejects(client.listResources({ cursor: 'not-a-cursor' }), /cursor/i, 'a cursor the server did not give');
  });
});
