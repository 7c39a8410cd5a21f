"""Grid of the stbt API: both constructor forms, the cells and their
regions (whole pixels, tiling the grid's region), and the conversions
between index, position, region and data, with their IndexErrors."""

import itertools
import unittest

import numpy

import stbt
from stbt import Grid, Position, Region


class GridTest(unittest.TestCase):
    def test_cols_and_rows(self):
        g = Grid(Region(10, 20, width=40, height=30), cols=4, rows=3)
        self.assertEqual((g.cols, g.rows, g.area, len(g)), (4, 3, 12, 12))
        self.assertIsNone(g.data)
        cell = g.get(index=6)
        self.assertEqual(cell, Grid.Cell(6, Position(2, 1), Region(30, 30, 10, 10), None))
        self.assertEqual((cell.index, cell.position, cell.region, cell.data),
                         (6, (2, 1), Region(30, 30, 10, 10), None))
        self.assertIn("cols=4", repr(g))

    def test_data_rows_give_the_shape(self):
        g = Grid(Region(0, 0, 90, 40), data=["xyz", ["OK", "BACK", "HOME"]])
        self.assertEqual((g.cols, g.rows), (3, 2))
        self.assertEqual([c.data for c in g], ["x", "y", "z", "OK", "BACK", "HOME"])
        self.assertEqual(g["BACK"].position, (1, 1))
        self.assertEqual(g.get(data="z").index, 2)
        with self.assertRaises(ValueError):
            Grid(Region(0, 0, 90, 40), cols=2, data=["xyz"])

    def test_cells_tile_the_region_in_whole_pixels(self):
        g = Grid(Region(x=7, y=3, width=101, height=52), cols=3, rows=4)
        regions = [c.region for c in g.cells]
        self.assertEqual(sum(r.area for r in regions), 101 * 52)
        self.assertEqual(Region.bounding_box(*regions), g.region)
        for r1, r2 in itertools.combinations(regions, 2):
            self.assertIsNone(Region.intersect(r1, r2))
        self.assertEqual([r.width for r in regions[:3]], [33, 34, 34])
        self.assertEqual([c.index for c in g], list(range(12)))

    def test_every_way_to_name_a_cell(self):
        g = Grid(Region(0, 0, 300, 200), data=["abc", "def"])
        e = g.get(index=4)
        for found in (g[4], g[-2], g[numpy.int64(4)], g[1, 1], g[Position(1, 1)], g.get(position=(1, 1)),
                      g["e"], g[Region(100, 100, 100, 100)], g.get(region=Region(150, 150, 70, 40))):
            self.assertEqual(found, e)
        # a region from elsewhere (a match, say) gives back the grid's own region
        self.assertEqual(g.get(region=Region(95, 110, 100, 60)).region, Region(100, 100, 100, 100))

    def test_outside_the_grid(self):
        g = Grid(Region(0, 0, 300, 200), data=["abc", "def"])
        for bad in (6, -7, (3, 0), (0, 2), "q", Region(300, 0, 10, 10), Region(-20, 0, 10, 10), ["abc"]):
            with self.assertRaises(IndexError, msg=repr(bad)):
                _ = g[bad]
        with self.assertRaises(ValueError):
            g.get()
        with self.assertRaises(ValueError):
            g.get(index=1, data="a")

    def test_same_class_as_stbt_core(self):
        self.assertIs(stbt.Grid, Grid)
        self.assertEqual(Grid.__module__, "stbt_core")


if __name__ == "__main__":
    unittest.main()
