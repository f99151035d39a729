pragma solidity >=0.8.0;

interface IRebalanceTargets {
    int target;
}