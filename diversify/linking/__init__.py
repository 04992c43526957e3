"""Linking: LSH bands (:mod:`.bands`, the S-curve and pigeonhole parameters) and the stages that
turn band collisions into verified union-find edges (:mod:`.link`)."""
