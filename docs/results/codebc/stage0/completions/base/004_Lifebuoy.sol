pragma solidity ^0.8.4;

contract Lifebuoy {
    public static class LifebuoyListener {
        private static const int MAX_LIFEBUYER_COUNT = 10;
        private static const int MAX_LIFEBUYER_COUNT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT_MULT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT_MULT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT_MULT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT_MULT_MULT_MULT = 10;

        private static const int MAX_LIFEBUYER_COUNT_MULT_MULT_MULT_MULT_MULT = 10;

        private static const int MAX