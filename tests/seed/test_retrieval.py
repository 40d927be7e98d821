
import json
from pathlib import Path
import sqlite3
import tempfile
import unittest
from make_corpus import make
from rag_eval.compat import connect, sync, retrieve, verify_source, expression, search_tool

TODAY = '2026-10-07'


class RetrievalTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name) / 'corpus'
        make(self.root)
        self.db = connect(Path(self.tmp.name) / 'index.sqlite')
        sync(self.db, self.root)

    def tearDown(self):
        self.db.close()
        self.tmp.cleanup()

    def search(self, q, **kwargs):
        return retrieve(self.db, q, as_of=kwargs.pop('as_of', TODAY), **kwargs)

    def test_conflicting_documents_are_both_returned(self):
        hits = self.search('导出 保留')
        self.assertEqual({r['doc_id'] for r in hits}, {'handbook', 'meeting'})
        self.assertEqual({r['line'] for r in hits}, {2})
        self.assertTrue(all(verify_source(self.root, r) for r in hits))
        self.assertTrue(all('[导出]' in r['snippet'] for r in hits))

    def test_archived_and_expired_excluded(self):
        self.assertEqual(self.search('7 天'), [])
        self.assertEqual(self.search('60 天'), [])
        self.assertEqual(len(self.search('60 天', as_of='2026-10-06')), 1)

    def test_empty_unrelated_and_synonym(self):
        for q in ('', ' ', '"', '***', '发票', '输出 保存'):
            with self.subTest(q=q):
                self.assertEqual(self.search(q), [])

    def test_unicode61_is_not_chinese_word_segmentation(self):
        hits = self.search('导出文件保留三十天')
        self.assertEqual([r['doc_id'] for r in hits], ['compact'])
        self.assertNotIn('compact', {r['doc_id'] for r in self.search('导出')})

    def test_quotes_and_operators_are_not_fts_programs(self):
        self.assertEqual(len(self.search('"导出" 保留')), 2)
        for q in ('导出 OR 薄荷', "x'; DROP TABLE chunks; --", 'NEAR(',
                  '导出 : (', '" OR "', '\"导出'):
            with self.subTest(q=q):
                self.search(q)  # must not raise SQL or MATCH syntax error
        self.assertEqual(self.db.execute('SELECT count(*) FROM chunks').fetchone()[0], 12)
        self.assertEqual(self.search('导出 OR 薄荷'), [])

    def test_direct_bound_match_still_has_syntax_errors(self):
        with self.assertRaises(sqlite3.OperationalError):
            self.db.execute('SELECT rowid FROM search WHERE search MATCH ?', ('"',)).fetchall()

    def test_reindex_is_stable_and_rename_keeps_id(self):
        before = {r['source_id'] for r in self.search('导出 保留')}
        sync(self.db, self.root)
        self.assertEqual(before, {r['source_id'] for r in self.search('导出 保留')})
        mf = self.root / 'manifest.json'
        items = json.loads(mf.read_text())
        (self.root / 'handbook.txt').rename(self.root / 'renamed.txt')
        items[1]['path'] = 'renamed.txt'
        mf.write_text(json.dumps(items), encoding='utf-8')
        sync(self.db, self.root)
        self.assertEqual(before, {r['source_id'] for r in self.search('导出 保留')})

    def test_update_replaces_old_terms_and_detects_stale_hit(self):
        old = self.search('30 天')[0]
        path = self.root / 'handbook.txt'
        path.write_text(path.read_text().replace('30', '45'), encoding='utf-8')
        self.assertFalse(verify_source(self.root, old))
        # An unsynchronized index still returns its old snapshot.
        self.assertEqual(len(self.search('30 天')), 1)
        sync(self.db, self.root)
        self.assertEqual(self.search('30 天'), [])
        new = self.search('45 天')[0]
        self.assertNotEqual(old['source_id'], new['source_id'])
        self.assertTrue(verify_source(self.root, new))

    def test_delete_requires_manifest_and_index_sync(self):
        mf = self.root / 'manifest.json'
        items = json.loads(mf.read_text())
        (self.root / 'meeting.txt').unlink()
        with self.assertRaises(FileNotFoundError):
            sync(self.db, self.root)
        self.assertEqual(len(self.search('14 天')), 1)  # old index intact
        mf.write_text(json.dumps([x for x in items if x['doc_id'] != 'meeting']))
        sync(self.db, self.root)
        self.assertEqual(self.search('14 天'), [])

    def test_invalid_manifest_cannot_wipe_index(self):
        mf = self.root / 'manifest.json'
        items = json.loads(mf.read_text())
        items[0]['path'] = '../outside.txt'
        mf.write_text(json.dumps(items))
        with self.assertRaises(ValueError):
            sync(self.db, self.root)
        self.assertEqual(len(self.search('导出 保留')), 2)

    def test_invalid_query_contract(self):
        for q in ('x' * 201, 'a\x00b', ' '.join(['a'] * 13), None):
            with self.subTest(q=q), self.assertRaises(ValueError):
                expression(q)
        with self.assertRaises(ValueError):
            self.search('导出', limit=True)
        with self.assertRaises(ValueError):
            self.search('导出', as_of='2026-1-1')

    def test_tool_returns_no_answer_on_no_hit(self):
        result = search_tool(self.db, '发票', as_of=TODAY)
        self.assertEqual(result['hits'], [])
        self.assertFalse(result['action_authority'])
        self.assertNotIn('answer', result)

    def test_snapshot_persists_on_reopen(self):
        path = Path(self.tmp.name) / 'index.sqlite'
        another = connect(path)
        try:
            self.assertEqual(len(retrieve(another, '导出 保留', as_of=TODAY)), 2)
        finally:
            another.close()


if __name__ == '__main__':
    unittest.main()