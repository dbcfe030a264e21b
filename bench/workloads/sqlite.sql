-- bench/workloads/sqlite.sql - an allocation-heavy, deterministic SQL script
-- for bench/run-malloc, on an in-memory database (every page in malloc'd
-- memory). The row count comes from the table p, created by the caller:
--   sqlite3 :memory: -cmd 'CREATE TABLE p(n); INSERT INTO p VALUES (200000)' < sqlite.sql
-- Pseudo-random values are multiplicative hashes of the row number, so the
-- output is the same under every allocator.
PRAGMA cache_size = -400000;
PRAGMA temp_store = MEMORY;

CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT, balance REAL, note TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, cust INTEGER, item INTEGER, qty INTEGER, price REAL, tag TEXT);
CREATE TABLE item(id INTEGER PRIMARY KEY, label TEXT, category TEXT);

WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < (SELECT n FROM p))
INSERT INTO customer
SELECT x, printf('customer-%07d', x), 'city-' || ((x * 2654435761) % 997),
       ((x * 40503) % 100000) / 100.0, substr(hex(x * x * 31), 1, 4 + x % 28)
FROM s;

WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 5000)
INSERT INTO item SELECT x, 'item ' || x || ' ' || hex(x * 7919), 'cat-' || (x % 37) FROM s;

WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 3 * (SELECT n FROM p))
INSERT INTO orders
SELECT x, 1 + (x * 2654435761) % (SELECT n FROM p), 1 + (x * 40503) % 5000, 1 + x % 9,
       ((x * 69069) % 10000) / 100.0, printf('%s-%x', 'tag', (x * 31) % 65536)
FROM s;

CREATE INDEX orders_cust ON orders(cust);
CREATE INDEX orders_item_qty ON orders(item, qty);
CREATE INDEX customer_city ON customer(city, balance);
CREATE INDEX orders_tag ON orders(tag);

-- Joins and group by.
SELECT count(*), sum(t) FROM (
  SELECT c.city, sum(o.qty * o.price) AS t
  FROM orders o JOIN customer c ON c.id = o.cust
  GROUP BY c.city);

SELECT count(*), max(n), min(n) FROM (
  SELECT i.category, c.city, count(*) AS n
  FROM orders o JOIN item i ON i.id = o.item JOIN customer c ON c.id = o.cust
  WHERE o.qty > 3
  GROUP BY i.category, c.city);

SELECT count(*), sum(length(g)) FROM (
  SELECT cust, group_concat(tag, ',') AS g FROM orders GROUP BY cust);

SELECT count(DISTINCT tag), count(DISTINCT cust || '/' || item) FROM orders;

-- Sorting wide rows, a window function, updates and deletes.
SELECT sum(r) FROM (
  SELECT row_number() OVER (PARTITION BY city ORDER BY balance DESC, id) AS r
  FROM customer) WHERE r <= 10;

SELECT count(*), sum(length(name || note)) FROM (
  SELECT name, note FROM customer ORDER BY note, name DESC);

UPDATE customer SET note = note || '-' || city, balance = balance * 1.01 WHERE id % 3 = 0;
DELETE FROM orders WHERE (id * 7) % 10 = 0;
CREATE TABLE summary AS
  SELECT c.city, count(o.id) AS n, avg(o.price) AS p
  FROM customer c LEFT JOIN orders o ON o.cust = c.id GROUP BY c.city;
SELECT count(*), sum(n), round(sum(p), 2) FROM summary;
SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM customer c WHERE c.id = o.cust AND c.balance < 10);
DROP INDEX orders_tag;
DROP TABLE orders;
SELECT count(*), round(sum(balance), 2) FROM customer;
